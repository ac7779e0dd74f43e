"""第 19 章：API Server 忙不过来时，同一个请求积压的几条回复合成一个片段。

不起服务：直接往 ``FrontendManager`` 的回复表里放回复，看 ``wait_for_ack`` 交出什么。
"""

from __future__ import annotations

import asyncio
from typing import Any

from minisgl.message import ReplyStatus, UserReply
from minisgl.server.frontend import FrontendManager


def _reply(uid: int, text: str, finished: bool, used: int) -> UserReply:
    status = ReplyStatus(prompt_tokens=3, completion_tokens=used)
    return UserReply(uid=uid, incremental_output=text, finished=finished, status=status)


def _collect(batches: list[list[UserReply]]) -> list[UserReply]:
    """每一批先全部放进表里（像 ``listen()`` 连着收到几步），再让 ``wait_for_ack`` 取一次。"""

    async def run() -> list[UserReply]:
        frontend: Any = FrontendManager(config=None, send_tokenizer=None, recv_tokenizer=None)
        uid = frontend.new_user()
        got: list[UserReply] = []
        acks = frontend.wait_for_ack(uid)
        for batch in batches:
            frontend.ack_map[uid].extend(batch)
            frontend.event_map[uid].set()
            got.append(await anext(acks))
        assert await anext(acks, None) is None  # 最后一条是结束的回复：迭代到此为止
        assert uid not in frontend.ack_map and uid not in frontend.event_map
        return got

    return asyncio.run(run())


def test_backlog_of_replies_becomes_one() -> None:
    first = [_reply(0, "Hel", False, 1)]
    backlog = [_reply(0, "lo", False, 2), _reply(0, ", wor", False, 3), _reply(0, "ld", True, 4)]
    got = _collect([first, backlog])
    assert [r.incremental_output for r in got] == ["Hel", "lo, world"]
    assert [r.finished for r in got] == [False, True]
    assert [r.status.completion_tokens for r in got] == [1, 4]  # 用量取最后一条的（累计的）


def test_replies_one_at_a_time_pass_through_unchanged() -> None:
    replies = [_reply(0, "a", False, 1), _reply(0, "b", False, 2), _reply(0, "", True, 3)]
    got = _collect([[r] for r in replies])
    assert got == replies
