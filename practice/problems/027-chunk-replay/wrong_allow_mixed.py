"""错误答案：不检查一步里是否混合了 prefill 与 decode，也不检查 decode 行的 extend_len。"""

from __future__ import annotations


def replay(
    prompt_lens: dict[int, int], steps: list[list[tuple[int, int]]]
) -> list[list[tuple[int, int, int, bool]]]:
    device_len = {uid: 0 for uid in prompt_lens}  # KV 池里已有的 token 数
    out: list[list[tuple[int, int, int, bool]]] = []
    for number, step in enumerate(steps):
        rows: list[tuple[int, int, int, bool]] = []
        kinds: set[str] = set()
        seen: set[int] = set()
        for uid, extend_len in step:
            if uid not in prompt_lens:
                raise ValueError(f"第 {number} 步：不认识请求 {uid}")
            if uid in seen:
                raise ValueError(f"第 {number} 步：请求 {uid} 出现了两次")
            if extend_len < 1:
                raise ValueError(f"第 {number} 步：请求 {uid} 的 extend_len = {extend_len}")
            seen.add(uid)
            prompt_len = prompt_lens[uid]
            cached = device_len[uid]
            new = cached + extend_len
            if cached < prompt_len:  # 还在 prefill（可能是其中一块）
                if new > prompt_len:
                    raise ValueError(f"第 {number} 步：请求 {uid} 的这一块越过了提示的末尾")
                kinds.add("prefill")
                sampled = new == prompt_len  # 只有最后一块的 logits 才是"下一个 token"
            else:
                kinds.add("decode")
                sampled = True
            device_len[uid] = new
            rows.append((uid, cached, new, sampled))
        # 错在这里：没有检查混合的批次
        out.append(rows)
    return out


def collect_outputs(
    prompt_lens: dict[int, int],
    steps: list[list[tuple[int, int]]],
    tokens: list[list[int]],
) -> dict[int, list[int]]:
    if len(tokens) != len(steps) or any(len(t) != len(s) for t, s in zip(tokens, steps)):
        raise ValueError("tokens 的形状和 steps 对不上")
    outputs: dict[int, list[int]] = {uid: [] for uid in prompt_lens}
    for rows, step_tokens in zip(replay(prompt_lens, steps), tokens):
        for (uid, _, _, sampled), token in zip(rows, step_tokens):
            if sampled:
                outputs[uid].append(token)  # 没采样的行：这个 token 直接丢掉
    return outputs
