"""反分词：调度器每一步为每个请求送来一个新 token，这里把它变成一小段新增的文本。

最直接的做法是每来一个 token 就把这个请求生成的全部 token 重新解码一遍，和上次的文本比较，
多出来的部分发出去。它有两个问题：

1. 越到后面越慢——第 n 个 token 要解码 n 个 token，一个请求总共 O(n²)；
2. 一个汉字、一个 emoji 在 UTF-8 里是 3～4 个字节，而 Qwen、GPT 系列的分词器按**字节**切分
   （byte-level BPE），一个字符可能被切在两三个 token 里。只收到前一半字节时，解码出来的是
   替换字符 U+FFFD（``"\\ufffd"``，显示成 �）。把它发给客户端，用户就会看到乱码一闪而过；
   下一个 token 到了以后，"�"又变成了真正的字符，已经发出去的文本却收不回来。

所以每个请求只在一个小**窗口**里解码，窗口只覆盖最近的几个 token：

- ``ids[prefix_offset:read_offset]`` 是上下文：它们的文本已经发出去了，重新解码只是为了知道
  "这段文本有多长"。为什么要带上下文，而不是只解码新 token？有的分词器（SentencePiece）解码
  一段 token 时会去掉开头的空格，单独解码 ``▁world`` 得到 ``world``，带着前一个 token 解码再
  减去前一个的文本，才得到正确的 `` world``；
- ``ids[read_offset:]`` 是还没发完的新 token。解码整个窗口，减去上下文的文本，就是新文本；
- 新文本的末尾是 "�"：最后一个字符还不完整，先不发它，它前面已经完整的字符照常发出
  （``held_sent`` 记下发了多少）；末尾完整时全部发出，窗口向前滑动：上下文变成刚发完的这几个
  token。

解码的约定（增量拼起来严格等于它）::

    tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

其中 ``ids`` 是这个请求生成的全部 token，去掉结尾的停止符。也就是说：

- 特殊 token（``<|im_end|>``、``<|endoftext|>`` 等）不出现在文本里，和第 8 章 ``LLM.generate``
  的 ``text`` 一致；Qwen3 的 ``<think>`` 不是特殊 token，照常出现；
- 请求以停止符结束时，那个停止符不变成文本——即使某个模型的停止符没有被标成特殊 token；
- 不做 ``clean_up_tokenization_spaces``（把 ``" ."`` 改成 ``"."`` 之类）：这种改写要看前后文，
  逐段解码时做不到和整体解码一致。

请求结束时把窗口里剩下的全部发出——如果生成恰好停在一个字符的中间（``max_tokens`` 到了），
整体解码的结尾也是 "�"，增量拼起来仍然和它相等。除此之外，发出的文本里不会出现因为截断而
产生的 "�"。

这个做法依赖一条性质：一段以完整字符结尾的 token 的解码结果，是它后面再接任何 token 时解码
结果的前缀。按字节切分的分词器（解码就是"拼字节、按 UTF-8 解码"）和 SentencePiece 都满足。
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from minisgl.message import DetokenizeMsg

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["NO_TOKEN", "REPLACEMENT_CHAR", "DecodeState", "DetokenizeManager"]

REPLACEMENT_CHAR = "\ufffd"  # UTF-8 解码遇到不完整或非法的字节时得到的字符
NO_TOKEN = -1  # DetokenizeMsg.next_token 为 -1：这一条没有 token（请求出错被拒绝，或被中止）


@dataclass
class DecodeState:
    """一个请求的反分词进度。"""

    ids: list[int] = field(default_factory=list)  # 生成的 token（不含去掉的停止符）
    prefix_offset: int = 0  # 窗口起点：ids[prefix_offset:read_offset] 是已经发出的上下文
    read_offset: int = 0  # ids[:read_offset] 的文本已经全部发出
    held_sent: int = 0  # ids[read_offset:] 的文本里，已经先发出去的字符数


class DetokenizeManager:
    """按 uid 保存每个请求的 ``DecodeState``；请求结束或被中止时删掉。"""

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, eos_token_ids: Iterable[int] | None = None
    ) -> None:
        self.tokenizer = tokenizer
        if eos_token_ids is None:
            eos = tokenizer.eos_token_id
            eos_token_ids = [] if eos is None else [eos]
        self.eos_token_ids = frozenset(eos_token_ids)
        self.states: dict[int, DecodeState] = {}

    def detokenize(self, msgs: list[DetokenizeMsg]) -> list[str]:
        """每条消息一段增量文本（可能是空串），顺序与输入相同。

        同一个 uid 在一批里出现多次时（调度器连着发了两步，tokenizer 一次收到），按先后分成几轮
        处理：每一轮里一个 uid 只出现一次，一轮的所有窗口一起解码。
        """
        outputs = [""] * len(msgs)
        pending = list(range(len(msgs)))
        while pending:
            wave: list[int] = []
            later: list[int] = []
            seen: set[int] = set()
            for i in pending:
                uid = msgs[i].uid
                (later if uid in seen else wave).append(i)
                seen.add(uid)  # 一旦有一条推迟，同一个 uid 后面的也都推迟，保持先后
            for i, text in zip(wave, self._step([msgs[i] for i in wave]), strict=True):
                outputs[i] = text
            pending = later
        return outputs

    def _step(self, msgs: list[DetokenizeMsg]) -> list[str]:
        """一轮：每个 uid 最多一条消息。"""
        states: list[DecodeState] = []
        windows: list[list[int]] = []
        contexts: list[list[int]] = []
        for msg in msgs:
            state = self.states.setdefault(msg.uid, DecodeState())
            token = msg.next_token
            stop = msg.finished and token in self.eos_token_ids
            if token != NO_TOKEN and not stop:
                state.ids.append(token)
            states.append(state)
            windows.append(state.ids[state.prefix_offset :])
            contexts.append(state.ids[state.prefix_offset : state.read_offset])
        # 窗口和上下文放进同一次 batch_decode：一轮只调用一次分词器
        texts = self.tokenizer.batch_decode(
            windows + contexts, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        outputs: list[str] = []
        for i, (msg, state) in enumerate(zip(msgs, states, strict=True)):
            window_text, context_text = texts[i], texts[len(msgs) + i]
            new_text = window_text[len(context_text) :]  # ids[read_offset:] 的文本
            if msg.finished:  # 最后一条：剩下的全部发出，状态删掉
                outputs.append(new_text[state.held_sent :])
                del self.states[msg.uid]
            elif new_text.endswith(REPLACEMENT_CHAR):  # 最后一个字符还差字节：先发它前面的
                ready = new_text.rstrip(REPLACEMENT_CHAR)
                outputs.append(ready[state.held_sent :])
                state.held_sent = max(state.held_sent, len(ready))
            else:  # 完整：全部发出，窗口向前滑，刚发完的 token 成为下一次的上下文
                outputs.append(new_text[state.held_sent :])
                state.prefix_offset, state.read_offset = state.read_offset, len(state.ids)
                state.held_sent = 0
        return outputs

    def abort(self, uid: int) -> None:
        """请求被中止：丢掉它的状态（不存在时什么也不做）。"""
        self.states.pop(uid, None)

    def __len__(self) -> int:
        """还在进行中的请求数。"""
        return len(self.states)
