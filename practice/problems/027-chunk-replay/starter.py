"""练习 027：重放分块之后的批次——推出 cached_len / device_len，只采样最后一块。"""

from __future__ import annotations


def replay(
    prompt_lens: dict[int, int], steps: list[list[tuple[int, int]]]
) -> list[list[tuple[int, int, int, bool]]]:
    """每一步的行 (uid, extend_len) 换成 (uid, cached_len, device_len, sampled)。

    prefill 行只有最后一块采样；decode 行（提示已算完）extend_len 必须是 1，总是采样；
    一步里不能混合 prefill 与 decode。不合法时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 replay")


def collect_outputs(
    prompt_lens: dict[int, int],
    steps: list[list[tuple[int, int]]],
    tokens: list[list[int]],
) -> dict[int, list[int]]:
    """tokens[i][j] 是第 i 步第 j 行采到的 token；只收下要采样的行，返回每个请求生成的 token。"""
    raise NotImplementedError("在这里实现 collect_outputs")
