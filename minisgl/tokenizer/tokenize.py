"""分词：把 API Server 送来的文本或对话变成调度器要的 token 张量。

``TokenizeMsg.text`` 有两种：

- 一段对话 ``[{"role": "user", "content": "你好"}, ...]``（``/v1/chat/completions`` 的 messages）：
  先用模型自带的对话模板（chat template）渲染成一个字符串，末尾加上"轮到助手说话了"的
  提示（``add_generation_prompt=True``），再编码。模板已经写好了模型需要的全部特殊 token
  （Qwen 的 ``<|im_start|>``、Llama 的 BOS），编码时不再自动添加；
- 一个字符串（``prompt``）：原样编码，分词器照它的规矩添加特殊 token（Qwen 什么也不加，
  Llama 会在开头加 BOS）。和第 8 章离线 ``LLM.generate`` 收到字符串时的做法相同。

结果是 CPU 上的 1 维 int32 张量——``UserMsg.input_ids`` 的约定。
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from minisgl.message import TokenizeMsg
from minisgl.utils import init_logger

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["TokenizeManager"]

logger = init_logger(__name__)


class TokenizeManager:
    """一批 ``TokenizeMsg`` → 一批 token 张量，顺序与输入相同。"""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer

    def render(self, text: str | list[dict[str, str]]) -> tuple[str, bool]:
        """返回 (要编码的字符串, 编码时是否让分词器添加特殊 token)。

        对话套模板；模板渲染失败（角色不认识、格式不对、模型根本没有模板）时抛出异常。
        """
        if isinstance(text, str):
            return text, True
        if not isinstance(text, list) or not all(isinstance(m, dict) for m in text):
            raise TypeError(f"text must be a str or a list of messages, got {type(text).__name__}")
        prompt = self.tokenizer.apply_chat_template(
            text, tokenize=False, add_generation_prompt=True
        )
        if not isinstance(prompt, str):
            raise TypeError(f"the chat template rendered {type(prompt).__name__}, not a str")
        return prompt, False

    def tokenize(self, msgs: list[TokenizeMsg]) -> list[torch.Tensor]:
        """每条消息一个 1 维 int32 张量。

        渲染失败的请求得到一个**空**张量，并记一条警告：调度器会以"提示为空"拒绝它，照常回一个
        出错的结束消息（第 8 章的 ``add_request``），客户端收到一个空的结束回复，而不是让整个
        tokenizer 进程因为一个坏请求而崩掉。
        """
        rendered: list[tuple[str, bool] | None] = []
        for msg in msgs:
            try:
                rendered.append(self.render(msg.text))
            except Exception as e:  # jinja 的各种错误、KeyError、TypeError……原因都在 e 里
                logger.warning(f"cannot tokenize request {msg.uid}: {type(e).__name__}: {e}")
                rendered.append(None)
        ids: list[list[int]] = [[] for _ in msgs]
        # 一次编码一批：快速分词器（Rust 实现）在批内多线程并行。套了模板的和原样编码的
        # 要不要加特殊 token 不同，分成两组各编码一次
        for add_special in (False, True):
            index = [i for i, r in enumerate(rendered) if r is not None and r[1] == add_special]
            if not index:
                continue
            texts = [rendered[i][0] for i in index]  # type: ignore[index]
            # verbose=False：提示比分词器的 model_max_length 长时，transformers 会警告"送进模型会
            # 越界"。长度由调度器按模型的上下文检查（第 8 章），这样的请求得到一个错误，进不了模型
            encoded: Any = self.tokenizer(texts, add_special_tokens=add_special, verbose=False)
            for i, row in zip(index, encoded["input_ids"], strict=True):
                ids[i] = list(row)
        return [torch.tensor(row, dtype=torch.int32) for row in ids]
