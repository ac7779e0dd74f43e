"""离线推理：``LLM(...).generate(prompts)``，一次交进去一批提示，等它们全部生成完。

它不开新进程、不走网络：在当前进程里建一个调度器，把所有提示放进等待队列，然后一步一步
地跑调度循环，直到每个请求都结束。和在线服务用的是同一个调度器，只是请求一次性到齐。
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from minisgl.core import SamplingParams
from minisgl.scheduler import PendingReq, Scheduler, SchedulerConfig, TokenOutput
from minisgl.utils import load_tokenizer

__all__ = ["LLM", "RequestOutput"]


@dataclass
class RequestOutput:
    """一个请求的最终结果。出错的请求 ``token_ids`` 为空，``error`` 说明原因。"""

    uid: int
    prompt_ids: list[int]
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    error: str | None = None


class LLM:
    """``LLM("models/tiny-qwen3", num_pages=256)``：关键字参数就是 ``SchedulerConfig`` 的字段。"""

    def __init__(self, model_path: str | Path, **config: Any) -> None:
        self.config = SchedulerConfig(model_path=model_path, **config)
        self.scheduler = Scheduler(self.config)
        self._tokenizer: Any = None
        self._next_uid = 0
        self._shut_down = False

    @property
    def tokenizer(self) -> Any:
        """分词器按需加载：只传 token id 的调用方用不着它。"""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.config.model_path)
        return self._tokenizer

    def generate(
        self,
        prompts: Sequence[str] | Sequence[Sequence[int]],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[RequestOutput]:
        """文本（原样编码，不套对话模板）或 token id 列表；采样参数可以一个，也可以每个提示一个。
        返回的顺序和 ``prompts`` 相同。"""
        if self._shut_down:  # 引擎和它的显存都已经放掉了：说清楚，而不是在深处报一个无关的错
            raise RuntimeError("this LLM has been shut down; create a new one")
        if isinstance(prompts, str):  # 否则会被当成一串提示，每个字符一个
            raise TypeError("prompts must be a list; wrap a single prompt as [prompt]")
        if sampling_params is None or isinstance(sampling_params, SamplingParams):
            sampling_params = [sampling_params or SamplingParams()] * len(prompts)
        if len(sampling_params) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(sampling_params)} sampling params")
        results: dict[int, RequestOutput] = {}
        # 先把每个提示都变成张量，再放进调度器：一个提示的类型不对，在这里就报错，不会把前面的
        # 几个留在等待队列里（下一次调用会跑到它们）
        reqs: list[PendingReq] = []
        for prompt, params in zip(prompts, sampling_params):
            ids = self.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
            uid, self._next_uid = self._next_uid, self._next_uid + 1
            results[uid] = RequestOutput(uid, prompt_ids=ids)
            reqs.append(PendingReq(uid, _token_tensor(ids), params))
        for req in reqs:
            self._record(results, self.scheduler.add_request(req))
        while self.scheduler.has_work:
            for out in self.scheduler.step():
                self._record(results, out)
        for r in results.values():
            if r.token_ids and isinstance(prompts[0], str):
                r.text = self.tokenizer.decode(r.token_ids, skip_special_tokens=True)
        return list(results.values())

    @staticmethod
    def _record(results: dict[int, RequestOutput], out: TokenOutput | None) -> None:
        r = results.get(out.uid) if out is not None else None
        if r is None:  # 没有输出，或者是之前一次被打断（Ctrl-C）的调用留下、这次接着跑完的请求
            return
        if out.token is not None:
            r.token_ids.append(out.token)
        if out.finished:
            r.finish_reason, r.error = out.finish_reason, out.error

    def shutdown(self) -> None:
        """放掉引擎（显存、进程组）。可以调用多次；之后再 ``generate`` 会报错。"""
        if not self._shut_down:
            self._shut_down = True
            self.scheduler.shutdown()


def _token_tensor(ids: list[int]) -> torch.Tensor:
    """token id 的列表 → int32 张量。小数、布尔、嵌套的列表报错：``torch.tensor(..., dtype=int32)``
    会把 2.7 悄悄截成 2、把 True 当成 1。超出 int32 的 id 也报错：int64 转 int32 会把它悄悄绕回
    一个合法的 id。

    常见的是一列 Python 整数：先看一遍各元素的类型（在 C 里），再让 numpy 一次转完。逐个交给
    ``torch.tensor`` 推断、再逐个查是不是布尔，64 个 512 token 的提示要多花几毫秒，而这几毫秒
    都在第一步之前，GPU 只能等着。"""
    if set(map(type, ids)) <= {int}:  # bool 是 int 的子类，可 type(True) 不是 int，不走这里
        try:
            tokens = torch.from_numpy(np.array(ids, dtype=np.int64))
        except OverflowError:  # 连 int64 都放不下
            raise ValueError("token ids must fit in int32") from None
    else:  # 别的写法（numpy 的整数、0 维张量……）让 torch 推断类型再检查
        tokens = torch.tensor(ids)
        is_bool = tokens.dtype == torch.bool or any(isinstance(t, bool) for t in ids)
        if ids and (tokens.dim() != 1 or tokens.is_floating_point() or is_bool):
            raise TypeError(f"a prompt is a str or a flat list of int token ids, got {ids[:4]}...")
    if ids and not -(2**31) <= int(tokens.min()) <= int(tokens.max()) < 2**31:
        raise ValueError("token ids must fit in int32")
    return tokens.to(torch.int32)
