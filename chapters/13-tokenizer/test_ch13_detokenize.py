"""第 13 章：增量反分词。

用真实的 Qwen 词表拼出各种切法：分词器自己的切法、每个字节一个 token（一个汉字 3 个 token、
一个 emoji 4 个 token）、以及在词表里随机挑 token 的切法（有的 token 横跨两个字符）。每一种都
检查：增量拼起来等于整体解码；流中间从不发出 "�"；而且每个字符一凑齐就发出，不多等。
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from minisgl.message import DetokenizeMsg
from minisgl.tokenizer import DetokenizeManager
from minisgl.utils import load_tokenizer

TEXTS = {
    "english": "Hello, world! It's 42 degrees.\nNew line.",
    "chinese": "你好，世界。魑魅魍魉、饕餮和龘都是生僻字。",
    "emoji": "emoji 😀🫠👨‍👩‍👧 mixed 混合 🦄!",
}
EOS = 151645  # <|im_end|>


def _byte_to_unicode() -> dict[int, str]:
    """GPT-2 / Qwen 的 byte-level BPE 把每个字节映射成一个可见字符，词表里的 token 由它们组成。"""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += list(range(ord("®"), ord("ÿ") + 1))
    mapping = {b: chr(b) for b in keep}
    n = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + n)
            n += 1
    return mapping


class Vocab:
    """词表里每个 token 对应的原始字节，以及"字节串 → token"的反查表。"""

    def __init__(self, tokenizer: Any) -> None:
        to_byte = {c: b for b, c in _byte_to_unicode().items()}
        self.token_bytes: dict[int, bytes] = {}
        self.by_bytes: dict[bytes, int] = {}
        for piece, token in tokenizer.get_vocab().items():
            if all(c in to_byte for c in piece):
                raw = bytes(to_byte[c] for c in piece)
                self.token_bytes[token] = raw
                self.by_bytes.setdefault(raw, token)

    def single_bytes(self, data: bytes) -> list[int]:
        return [self.by_bytes[bytes([b])] for b in data]

    def random_split(self, data: bytes, rng: random.Random) -> list[int]:
        """从左到右，每次随机取一个"是词表里某个 token"的字节前缀。"""
        ids, i = [], 0
        while i < len(data):
            n = rng.choice([n for n in range(1, 9) if data[i : i + n] in self.by_bytes])
            ids.append(self.by_bytes[data[i : i + n]])
            i += n
        return ids


@pytest.fixture(scope="module")
def tokenizer(tiny_model: Path) -> Any:
    return load_tokenizer(tiny_model)


@pytest.fixture(scope="module")
def vocab(tokenizer: Any) -> Vocab:
    return Vocab(tokenizer)


def stream(manager: DetokenizeManager, uid: int, ids: list[int]) -> list[str]:
    """一个 token 一条消息，最后一条带 finished，返回每条的增量。"""
    return [
        manager.detokenize([DetokenizeMsg(uid, t, i == len(ids) - 1)])[0] for i, t in enumerate(ids)
    ]


def complete_prefix(data: bytes) -> str:
    """字节串里"已经完整的字符"：去掉结尾不完整的 UTF-8 序列后解码。"""
    for cut in range(len(data), max(-1, len(data) - 4), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    raise AssertionError(f"not valid UTF-8 apart from the tail: {data!r}")


def splits(tokenizer: Any, vocab: Vocab, text: str) -> dict[str, list[int]]:
    data = text.encode()
    rng = random.Random(len(data))
    result = {"tokenizer": tokenizer.encode(text), "bytes": vocab.single_bytes(data)}
    result |= {f"random{k}": vocab.random_split(data, rng) for k in range(4)}
    return result


@pytest.mark.parametrize("name", TEXTS)
def test_increments_concatenate_to_the_full_decode(tokenizer: Any, vocab: Vocab, name: str) -> None:
    text = TEXTS[name]
    for how, ids in splits(tokenizer, vocab, text).items():
        assert b"".join(vocab.token_bytes[t] for t in ids) == text.encode(), how
        manager = DetokenizeManager(tokenizer)
        parts = stream(manager, uid=7, ids=ids)
        assert "".join(parts) == tokenizer.decode(ids, skip_special_tokens=True) == text, how
        assert not any("\ufffd" in p for p in parts), (how, parts)
        # 每一步之后，已经发出的正好是"已经完整的字符"：不早（不切开字符），也不晚（不多等）
        for k in range(len(ids)):
            sent = "".join(parts[: k + 1])
            assert sent == complete_prefix(b"".join(vocab.token_bytes[t] for t in ids[: k + 1]))
        assert len(manager) == 0  # 结束时状态删掉


def test_some_splits_really_cut_characters(tokenizer: Any, vocab: Vocab) -> None:
    """上面的测试不是空转：单独解码切开的 token 会得到 "�"，而且有的 token 横跨两个字符。"""
    ids = vocab.single_bytes("好".encode())
    assert [tokenizer.decode([t]) for t in ids] == ["\ufffd"] * 3
    # b"\xe8\xae" + b"\xa2\xe5\x8d\x95"：第 2 个 token 里是"订"的最后一个字节和整个"单"
    crossing = [10203, 43720]
    assert [vocab.token_bytes[t] for t in crossing] == [b"\xe8\xae", b"\xa2\xe5\x8d\x95"]
    assert tokenizer.decode([43720]) == "\ufffd单"
    assert stream(DetokenizeManager(tokenizer), 0, crossing + [0]) == ["", "订单", "!"]


def test_complete_characters_before_a_cut_are_sent_at_once(tokenizer: Any, vocab: Vocab) -> None:
    # b" \xe5"：一个完整的空格 + "好" 的第 1 个字节。空格马上发出，不等 "好" 凑齐
    ids = [vocab.by_bytes[b"Hi"], vocab.by_bytes[b" \xe5"], *vocab.single_bytes(b"\xa5\xbd")]
    assert stream(DetokenizeManager(tokenizer), 0, ids + [EOS]) == ["Hi", " ", "", "好", ""]


def test_eos_and_special_tokens_are_not_text(tokenizer: Any) -> None:
    manager = DetokenizeManager(tokenizer)
    ids = tokenizer.encode("Hi there")
    # 以停止符结束：停止符不变成文本
    assert "".join(stream(manager, 0, ids + [EOS])) == "Hi there"
    # 即使停止符没有被标成特殊 token（这里拿一个普通 token 当停止符），结束时也去掉
    period = tokenizer.encode(".")[0]
    custom = DetokenizeManager(tokenizer, eos_token_ids=[period])
    assert "".join(stream(custom, 1, ids + [period])) == "Hi there"
    # 中途的特殊 token（ignore_eos 时模型可能生成 <|endoftext|>）不出现；<think> 不是特殊 token
    think, endoftext = tokenizer.convert_tokens_to_ids(["<think>", "<|endoftext|>"])
    mid = [think, *tokenizer.encode("\n\n"), endoftext, *ids]
    parts = stream(manager, 2, mid)
    assert "".join(parts) == "<think>\n\nHi there"
    assert "".join(parts) == tokenizer.decode(mid, skip_special_tokens=True)
    # 停止符只在结束时去掉：没结束时按特殊 token 处理（也不是文本）
    assert stream(manager, 3, [EOS, *ids]) == ["", "Hi", " there"]


def test_finish_in_the_middle_of_a_character_flushes(tokenizer: Any, vocab: Vocab) -> None:
    """max_tokens 恰好停在字符中间：整体解码的结尾是 "�"，最后一条把它发出去，两边仍然相等。"""
    ids = [vocab.by_bytes[b"ok"], *vocab.single_bytes("好".encode()[:2])]
    parts = stream(DetokenizeManager(tokenizer), 0, ids)
    assert parts == ["ok", "", "\ufffd"]
    assert "".join(parts) == tokenizer.decode(ids)


def test_no_token_means_an_empty_finished_reply(tokenizer: Any) -> None:
    manager = DetokenizeManager(tokenizer)
    # 请求被调度器拒绝：从来没有 token，只有一条 -1
    assert manager.detokenize([DetokenizeMsg(5, -1, True)]) == [""]
    # 中止：已经发过一些文本，最后一条是 -1
    manager.detokenize([DetokenizeMsg(7, tokenizer.encode("Hi")[0], False)])
    assert manager.detokenize([DetokenizeMsg(7, -1, True)]) == [""]
    assert len(manager) == 0


def test_interleaved_uids_are_independent(tokenizer: Any, vocab: Vocab) -> None:
    """三个请求的 token 随机交错到达，一批里可以有好几个请求、甚至同一个请求的好几个 token。"""
    streams = {
        uid: vocab.random_split(text.encode(), random.Random(uid))
        for uid, text in enumerate(TEXTS.values())
    }
    alone = {uid: stream(DetokenizeManager(tokenizer), uid, ids) for uid, ids in streams.items()}
    msgs = []
    rng = random.Random(0)
    cursor = {uid: 0 for uid in streams}
    while any(cursor[u] < len(streams[u]) for u in streams):
        uid = rng.choice([u for u in streams if cursor[u] < len(streams[u])])
        ids, k = streams[uid], cursor[uid]
        msgs.append(DetokenizeMsg(uid, ids[k], k == len(ids) - 1))
        cursor[uid] += 1
    manager = DetokenizeManager(tokenizer)
    got: dict[int, list[str]] = {uid: [] for uid in streams}
    i = 0
    while i < len(msgs):  # 随机大小的批次
        batch = msgs[i : i + rng.randint(1, 6)]
        for m, text in zip(batch, manager.detokenize(batch)):
            got[m.uid].append(text)
        i += len(batch)
    assert got == alone  # 每一条的增量都和单独处理时一样
    assert len(manager) == 0


def test_abort_drops_the_state(tokenizer: Any) -> None:
    manager = DetokenizeManager(tokenizer)
    ids = tokenizer.encode("one two three")
    manager.detokenize([DetokenizeMsg(1, ids[0], False), DetokenizeMsg(2, ids[0], False)])
    assert len(manager) == 2
    manager.abort(1)
    manager.abort(99)  # 不存在的 uid：什么也不做
    assert set(manager.states) == {2}
    # uid 2 不受影响，照常进行、结束
    assert manager.detokenize([DetokenizeMsg(2, ids[1], True)]) == [" two"]
    assert len(manager) == 0
