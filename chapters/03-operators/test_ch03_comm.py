"""第 3 章：通信器。tp=1 时是恒等函数；tp=2 时用两个真的进程（gloo，CPU 上就能跑）检查
all_reduce、all_gather，以及行并行线性层、词表并行 embedding、LM head 的完整 forward。"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import minisgl
from minisgl.distributed import DistributedCommunicator, DistributedInfo

PACKAGE_PARENT = str(Path(minisgl.__file__).resolve().parent.parent)


def test_tp1_is_identity_without_any_process_group() -> None:
    assert not dist.is_initialized()
    comm = DistributedCommunicator(DistributedInfo(0, 1))
    x = torch.randn(3, 4)
    assert comm.all_reduce(x) is x
    assert comm.all_gather(x) is x


def test_tp_info_must_match_the_process_group(tmp_path: Path) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        comm = DistributedCommunicator(DistributedInfo(0, 2))
        with pytest.raises(RuntimeError, match=r"rank 0 of 2.*rank 0 of 1"):
            comm.all_reduce(torch.ones(2))
    finally:
        dist.destroy_process_group()


WORKER = textwrap.dedent(
    """
    import sys

    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn.functional as F

    from minisgl.distributed import DistributedCommunicator, set_tp_info
    from minisgl.layers import LinearRowParallel, ParallelLMHead, VocabParallelEmbedding

    TP, VOCAB, HIDDEN, INTER = 2, 7, 4, 6


    def vocab_shard(full, rank):
        per = -(-VOCAB // TP)
        part = full[rank * per : (rank + 1) * per]
        return torch.cat([part, part.new_zeros(per - len(part), HIDDEN)])


    def worker(rank, folder):
        store = folder + "/store"
        dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=TP)
        set_tp_info(rank, TP)
        comm = DistributedCommunicator()

        x = torch.full((2, 3), float(rank + 1))
        y = comm.all_reduce(x)
        assert y is x and torch.equal(y, torch.full((2, 3), 3.0)), y  # 1 + 2，原地

        mine = torch.tensor([[10.0 * rank, 10.0 * rank + 1]])
        assert comm.all_gather(mine).tolist() == [[0.0, 1.0, 10.0, 11.0]]
        assert comm.all_gather(mine, dim=0).tolist() == [[0.0, 1.0], [10.0, 11.0]]

        torch.manual_seed(0)  # 每个 rank 生成同一份完整权重，各取自己那片
        w, b = torch.randn(HIDDEN, INTER), torch.randn(HIDDEN)
        table = torch.randn(VOCAB, HIDDEN)
        h = torch.randn(5, INTER)
        ids = torch.tensor([0, 6, 3, 4, 2])

        row = LinearRowParallel(INTER, HIDDEN, bias=True)
        row.load_state_dict({"weight": w.chunk(TP, dim=1)[rank], "bias": b})
        out = row(h.chunk(TP, dim=-1)[rank])
        torch.testing.assert_close(out, F.linear(h, w, b))

        emb = VocabParallelEmbedding(VOCAB, HIDDEN)
        emb.load_state_dict({"weight": vocab_shard(table, rank)})
        hidden = emb(ids)
        assert torch.equal(hidden, table[ids]), (hidden, table[ids])

        head = ParallelLMHead(VOCAB, HIDDEN, tied_embedding=emb)
        logits = head(hidden, torch.tensor([1, 4]))
        assert logits.shape == (2, VOCAB)
        torch.testing.assert_close(logits, hidden[[1, 4]] @ table.T)

        dist.destroy_process_group()
        # 用文件报告结果：两个进程同时往一个管道里 print，行可能交错
        open(f"{folder}/rank{rank}.ok", "w").close()


    if __name__ == "__main__":
        mp.spawn(worker, args=(sys.argv[1],), nprocs=TP)
    """
)


def test_two_gloo_processes(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")]),
        OMP_NUM_THREADS="1",
    )
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    done = sorted(p.name for p in tmp_path.glob("rank*.ok"))
    assert done == ["rank0.ok", "rank1.ok"], proc.stdout + proc.stderr
