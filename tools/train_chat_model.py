"""训练书里的演示模型：一个小的 Qwen3，用 ``chat_curriculum`` 现场出的题教会它答题。

    python tools/train_chat_model.py                       # GPU 上的完整训练（约 8 分钟），写回仓库
    python tools/train_chat_model.py --size smoke --steps 30 --out /tmp/x   # 几秒钟的试跑

- 模型：Qwen3 结构（``make_tiny_model.demo_chat_config``），分词器和对话模板就是内嵌模型用的那一套；
- 数据：每一步按 ``MIX`` 的比例现场出题（种子决定一切，不下载任何数据），套上对话模板；
  出题和分词在几个 DataLoader 进程里做，GPU 不用等；只在回答的 token 上算损失；
- 词表：15 万行的嵌入里，训练只更新课程用得到的那些行（``trainable_ids``，小写字母片段除外），
  其余的行保持 ``make_tiny_model.initial_embedding`` 按种子算出的初值，一个字节都不变；
- 输出的 logits 只在回答的位置上算：整个批次每个位置都乘 15 万行的词表，显存就不够了；
- 学习率：预热后按余弦降到零；给了 ``--minutes`` 时按用掉的时间算进度，到点就停；
- 写出：``weights.safetensors`` 只存改过的嵌入行和其余张量（float16），``make_tiny_model.py``
  把它和种子算出的初值拼成完整模型；评测用的正是拼出来的模型：换一个训练时没见过的种子出题，
  贪心生成，按 ``chat_curriculum.score`` 逐类打分，写进 ``train_log.json``。
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_model as tiny  # noqa: E402
from chat_curriculum import TASKS, Example, make_example, make_examples, score  # noqa: E402

MIX = {
    "add_sub": 0.37,
    "sort": 0.12,
    "reverse": 0.12,
    "repeat": 0.24,
    "greeting": 0.05,
    "other": 0.1,
}
# 客户端常带的系统提示：训练时有一部分题目带上它，模型就不会被它带偏
SYSTEM_PROMPTS = (
    "You are a helpful assistant.",
    "You are a helpful assistant",
    "你是一个有用的助手。",
    "Answer briefly.",
)
SYSTEM_RATE = 0.15
# 对话模板的 enable_thinking=False 会在回答前放一个空的思考块：也教模型认得它
EMPTY_THINK = "<think>\n\n</think>\n\n"
THINK_RATE = 0.1
EVAL_SEED = 20261201  # 评测题的种子：和训练用的种子不同，题目训练时没见过
OUT_DIR = tiny.TRAINED_WEIGHTS.parent


def smoke_config() -> dict[str, object]:
    return tiny.qwen3_config(
        hidden=32, layers=1, heads=2, kv_heads=1, head_dim=16, intermediate=64,
        max_pos=512, tie=True, dtype="float32",
    )  # fmt: skip


SIZES = {"full": tiny.demo_chat_config, "smoke": smoke_config}


def render(
    example: Example, system: str | None = None, empty_think: bool = False
) -> tuple[str, str]:
    """对话模板渲染出的（提示, 回答）两段文字，和服务里 ``apply_chat_template`` 的结果一致。"""
    head = f"<|im_start|>system\n{system}<|im_end|>\n" if system else ""
    prompt = f"{head}<|im_start|>user\n{example.prompt}<|im_end|>\n<|im_start|>assistant\n"
    return prompt + (EMPTY_THINK if empty_think else ""), f"{example.answer}<|im_end|>"


class Encoder:
    def __init__(self) -> None:
        from tokenizers import Tokenizer

        path = tiny.DEFAULT_OUT / "tiny-qwen3" / "tokenizer.json"
        if not path.exists():
            raise SystemExit(f"缺少 {path}：先运行 python tools/make_tiny_model.py --ensure")
        self.tok = Tokenizer.from_file(str(path))

    def ids(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tok.encode_batch(texts, add_special_tokens=False)]

    def pairs(self, rendered: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
        ids = self.ids([text for pair in rendered for text in pair])
        return list(zip(ids[0::2], ids[1::2]))

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True)


# 只由小写字母组成的 token（可带前导空格）：生造词切出来的片段就是这些，词表里有四万多个
_WORD_PIECE = re.compile(r" ?[a-z]+")


def trainable_ids(enc: Encoder, seed: int, per_task: int, min_count: int = 10) -> list[int]:
    """训练更新的嵌入行：在大量抽样的题目里出现至少 ``min_count`` 次、又不是小写字母片段的 token，
    加上系统提示里的。

    小写字母片段一律保持随机初值：复述题里的生造词会切出任何一个片段，训练只见过其中一部分；
    全都不训练，模型学到的就是“照抄任意一个随机向量”，换了没见过的片段也一样抄。"""
    counts: Counter[int] = Counter()
    for task in TASKS:
        for prompt, answer in enc.pairs(
            [render(ex) for ex in make_examples(seed + 1, task, per_task)]
        ):
            counts.update(prompt)
            counts.update(answer)
    used = {token for token, n in counts.items() if n >= min_count}
    fixed = [render(Example("", "", "", ""), system, True)[0] for system in SYSTEM_PROMPTS]
    for ids in enc.ids(fixed):
        used.update(ids)
    return sorted(t for t in used if not _WORD_PIECE.fullmatch(enc.decode([t])))


def make_batch(
    enc: Encoder, rng: random.Random, size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask, 目标)：目标在回答的位置上是下一个 token，其余是 -100。"""
    tasks = rng.choices(list(MIX), weights=list(MIX.values()), k=size)
    rendered = []
    for task in tasks:
        system = rng.choice(SYSTEM_PROMPTS) if rng.random() < SYSTEM_RATE else None
        empty_think = rng.random() < THINK_RATE
        rendered.append(render(make_example(rng, task), system, empty_think))
    rows = enc.pairs(rendered)
    width = max(len(p) + len(a) for p, a in rows)
    ids = torch.full((size, width), tiny.ENDOFTEXT_ID, dtype=torch.long)
    mask = torch.zeros((size, width), dtype=torch.long)
    target = torch.full((size, width), -100, dtype=torch.long)
    for i, (p, a) in enumerate(rows):
        seq = p + a
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
        # 位置 t 的输出预测第 t+1 个 token：回答的第一个 token 由提示的最后一个位置预测
        target[i, len(p) - 1 : len(seq) - 1] = torch.tensor(a)
    return ids, mask, target


class Batches(torch.utils.data.IterableDataset):
    """无穷的批次流。每个 DataLoader 进程有自己的随机数（由种子和进程号决定），
    DataLoader 按进程轮流取批次，所以同样的种子、同样的进程数得到同样的数据。"""

    def __init__(self, seed: int, size: int) -> None:
        self.seed, self.size = seed, size

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        info = torch.utils.data.get_worker_info()
        rng = random.Random(f"{self.seed}:{info.id if info else 0}")
        enc = Encoder()
        while True:
            yield make_batch(enc, rng, self.size)


def build_model(config: dict[str, object], seed: int, device: torch.device) -> torch.nn.Module:
    """transformers 的 Qwen3；嵌入的初值按名字和种子算（``make_tiny_model.initial_embedding``），
    没训练的行因此可以在任何机器上原样重建。"""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(Qwen3Config(**config))
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(
            torch.from_numpy(tiny.initial_embedding(config, seed))
        )
    return model.to(device)


def freeze_other_rows(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    """嵌入的梯度只留 ``ids`` 这些行；返回训练前的嵌入，用来检查别的行确实没动。"""
    weight = model.model.embed_tokens.weight
    mask = torch.zeros(weight.shape[0], 1, device=weight.device)
    mask[ids] = 1.0
    weight.register_hook(lambda g: g * mask)
    return weight.detach().clone()


def answer_loss(
    model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, target: torch.Tensor
) -> torch.Tensor:
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    picked = target != -100
    logits = hidden[picked] @ model.model.embed_tokens.weight.T  # 只在回答的位置上乘词表
    return F.cross_entropy(logits.float(), target[picked])


def save_trained(model: torch.nn.Module, ids: list[int], path: Path) -> None:
    """只存训练改过的东西：课程用到的嵌入行（和它们的 id），以及嵌入以外的全部张量。"""
    from safetensors.torch import save_file

    state = {k: v.detach().cpu() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    rows = torch.tensor(ids, dtype=torch.long)
    tensors = {tiny.ROW_IDS_NAME: rows.to(torch.int32)}
    tensors[tiny.EMBED_NAME] = state.pop(tiny.EMBED_NAME)[rows].half().contiguous()
    tensors |= {k: v.half().contiguous() for k, v in state.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(dict(sorted(tensors.items())), str(path), metadata={"format": "pt"})


def load_assembled(
    config: dict[str, object], seed: int, path: Path, device: torch.device
) -> torch.nn.Module:
    """``make_tiny_model`` 拼出的完整模型：评测的就是要发布的东西。"""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    model = Qwen3ForCausalLM(Qwen3Config(**config))
    state = tiny.assemble_trained(config, seed, path)
    tensors = {k: torch.from_numpy(v) for k, v in state.items()}
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    assert set(missing) <= {"lm_head.weight"} and not unexpected, (missing, unexpected)
    model.tie_weights()
    return model.to(device).eval()


@torch.no_grad()
def evaluate(
    model: torch.nn.Module, enc: Encoder, per_task: int, device: torch.device, max_new: int = 64
) -> dict[str, float]:
    """每类 ``per_task`` 道没见过的题，整批左填充、贪心生成，返回每类的准确率。"""
    accuracy: dict[str, float] = {}
    for task in TASKS:
        examples = make_examples(EVAL_SEED, task, per_task)
        prompts = enc.ids([render(ex)[0] for ex in examples])
        width = max(map(len, prompts))
        ids = torch.full((len(prompts), width), tiny.ENDOFTEXT_ID, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        out = model.generate(
            ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=max_new,
            do_sample=False,
            eos_token_id=tiny.IM_END_ID,
            pad_token_id=tiny.ENDOFTEXT_ID,
        )
        replies = [enc.decode(row[width:].tolist()) for row in out]
        accuracy[task] = sum(map(score, examples, replies)) / len(examples)
    return accuracy


def train(args: argparse.Namespace) -> dict[str, object]:
    device = torch.device(args.device)
    enc = Encoder()
    config = SIZES[args.size]()
    model = build_model(config, args.seed, device)
    ids = trainable_ids(enc, args.seed, args.vocab_sample)
    before = freeze_other_rows(model, ids)
    embed = model.model.embed_tokens.weight
    decay = [p for p in model.parameters() if p.dim() >= 2 and p is not embed]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": 0.01},
            # 嵌入不做权重衰减：冻住的行梯度为 0，AdamW 不会碰它们；衰减却会把它们一起缩小
            {"params": [embed, *rest], "weight_decay": 0.0},
        ],
        lr=args.lr,
        betas=(0.9, 0.98),
    )
    budget = args.minutes * 60 if args.minutes else None
    warmup = 200 if budget else min(200, args.steps // 10 + 1)
    loader = torch.utils.data.DataLoader(
        Batches(args.seed, args.batch),
        batch_size=None,
        num_workers=args.workers,
        pin_memory=device.type == "cuda",
        prefetch_factor=8 if args.workers else None,
        persistent_workers=bool(args.workers),
    )
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    losses: list[tuple[int, float]] = []
    start = time.perf_counter()
    step = 0
    for ids_, mask_, target_ in loader:
        elapsed = time.perf_counter() - start
        progress = elapsed / budget if budget else step / args.steps
        if progress >= 1:
            break
        scale = (step + 1) / warmup if step < warmup else 0.5 * (1 + math.cos(math.pi * progress))
        for group in opt.param_groups:
            group["lr"] = args.lr * scale
        batch = (t.to(device, non_blocking=True) for t in (ids_, mask_, target_))
        with autocast:
            loss = answer_loss(model, *batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % args.log_every == 0:
            losses.append((step, round(loss.item(), 5)))
            print(f"step {step:5d}  loss {loss.item():.4f}  {elapsed:.0f}s", flush=True)
        step += 1
    seconds = time.perf_counter() - start
    frozen = torch.ones(embed.shape[0], dtype=torch.bool, device=embed.device)
    frozen[ids] = False
    assert torch.equal(embed.detach()[frozen], before[frozen]), "冻住的嵌入行被改动了"
    out = Path(args.out)
    weights = out / tiny.TRAINED_WEIGHTS.name
    save_trained(model, ids, weights)
    del model, before
    shipped = load_assembled(config, args.seed, weights, device)
    accuracy = evaluate(shipped, enc, args.eval, device) if args.eval else {}
    for task, acc in accuracy.items():
        print(f"{task:10s} {acc * 100:6.1f} %")
    log = {
        "command": " ".join(["python", "tools/train_chat_model.py", *sys.argv[1:]]),
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "size": args.size,
        "parameters": sum(p.numel() for p in shipped.parameters()),
        "trainable_rows": len(ids),
        "steps": step,
        "batch": args.batch,
        "lr": args.lr,
        "seconds": round(seconds, 1),
        "weights_bytes": weights.stat().st_size,
        "loss": losses,
        "eval_seed": EVAL_SEED,
        "eval_per_task": args.eval,
        "accuracy": accuracy,
    }
    (out / "train_log.json").write_text(json.dumps(log, ensure_ascii=False, indent=1) + "\n")
    return log


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(OUT_DIR), help="写 weights.safetensors 和 train_log.json")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--minutes", type=float, default=8.0, help="训练多久（0：按 --steps）")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0, help="初值的种子，须与 make_tiny_model 的一致")
    ap.add_argument("--eval", type=int, default=500, help="每类评测几道题（0：不评测）")
    ap.add_argument("--vocab-sample", type=int, default=20000, help="每类抽几道题来找用到的 token")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--workers", type=int, default=min(12, (os.cpu_count() or 2) - 1))
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    ap.add_argument("--device", default=default_device)
    args = ap.parse_args(argv)
    # 分词放在 DataLoader 的进程里并行；每个进程里的分词器不再自己开线程
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    if args.size == "full" and args.seed != tiny.VARIANTS["demo-chat"].seed:
        ap.error("完整模型的种子由 make_tiny_model 的 demo-chat 变体决定")
    train(args)


if __name__ == "__main__":
    main()
