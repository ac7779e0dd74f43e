"""练习 026：分块预填充——按共用的 token 预算把提示切块，排出每一步的批次。"""

from __future__ import annotations


def chunk_schedule(
    prompts: list[tuple[int, int]], max_extend_tokens: int
) -> list[list[tuple[int, int, int]]]:
    """prompts 每项是 (uid, prompt_len)，按到达顺序。返回每一步的 [(uid, start, end), ...]。

    每一步从队头开始装，直到预算用完；装不下的请求切一块，留在队头，下一步接着算。
    max_extend_tokens < 1 或有提示为空时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 chunk_schedule")
