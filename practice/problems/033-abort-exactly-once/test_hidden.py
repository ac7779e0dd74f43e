"""033 的隐藏测试：分块时中止、运行中中止、结果在路上时中止、结束与中止同一步、重复中止、
行被重用之后、随机的中止时机 + 每一步的完整性检查。"""

import random

from solution import Scheduler


def same(actual, expected):
    """类型和取值都一致才算对：type 逐层相同（list/tuple/dict 递归进去），最后才比 ==。

    只比 == 的话，返回 1 冒充 1.0、True 冒充 1，或者返回一个和谁比都相等的对象，都能蒙混过关。
    """
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(map(same, actual, expected))
    if isinstance(expected, dict):
        keys_match = actual.keys() == expected.keys()
        return keys_match and all(same(actual[k], expected[k]) for k in expected)
    return bool(expected == actual)


class StrictPool:
    def __init__(self, num_rows, num_pages):
        self.num_rows, self.num_pages = num_rows, num_pages
        self.free_rows = list(range(num_rows))
        self.free_page_list = list(range(num_pages))

    def num_free_rows(self):
        return len(self.free_rows)

    def num_free_pages(self):
        return len(self.free_page_list)

    def alloc_row(self):
        assert self.free_rows, "没有空闲的行却还要分配"
        return self.free_rows.pop(0)

    def alloc_pages(self, n):
        assert n <= len(self.free_page_list), "页不够却还要分配"
        pages, self.free_page_list = self.free_page_list[:n], self.free_page_list[n:]
        return pages

    def free_row(self, row):
        if not isinstance(row, int) or row in self.free_rows or not 0 <= row < self.num_rows:
            raise RuntimeError(f"重复释放第 {row} 行")
        self.free_rows.append(row)

    def free_pages(self, pages):
        twice = [p for p in pages if p in self.free_page_list]
        if twice or len(set(pages)) != len(pages):
            raise RuntimeError(f"重复释放页 {twice or pages}")
        self.free_page_list.extend(pages)

    def write(self, row, pages):
        if not isinstance(row, int) or row in self.free_rows:
            raise RuntimeError(f"往已经释放的第 {row} 行里写")
        if any(p in self.free_page_list for p in pages):
            raise RuntimeError(f"往已经释放的页里写：{pages}")

    def all_free(self):
        return sorted(self.free_rows) == list(range(self.num_rows)) and sorted(
            self.free_page_list
        ) == list(range(self.num_pages))


def check_integrity(s, pool):
    """每一行、每一页：要么空闲，要么被一个没结束的请求占着，恰好一次。结束了的请求什么也不占。"""
    live = [r for r in s.reqs.values() if not r.finished]
    rows = [r.row for r in live if r.row is not None] + pool.free_rows
    assert same(sorted(rows), list(range(pool.num_rows))), f"行对不上：{sorted(rows)}"
    pages = [p for r in live for p in r.pages] + pool.free_page_list
    assert same(sorted(pages), list(range(pool.num_pages))), f"页对不上：{sorted(pages)}"
    for r in s.reqs.values():
        if r.finished:
            assert r.row is None and r.pages == [], f"结束了的请求 {r.uid} 还占着资源"
    assert all(not r.finished for r in s.waiting), "结束了的请求还在排队"
    assert all(not r.finished for r in s.running), "结束了的请求还在 running 里"
    assert s.chunked is None or not s.chunked.finished, "结束了的请求还在分块 prefill"


def drain(s, pool, limit=200):
    steps = []
    while not s.idle():
        steps.append(s.step())
        check_integrity(s, pool)
        assert len(steps) < limit, "跑了太多步还没结束"
    return steps


def uids(steps):
    return [uid for step in steps for uid, _, _ in step]


def test_abort_while_chunked():
    pool = StrictPool(2, 10)
    s = Scheduler(pool, page_size=4, chunk_size=4)
    s.add(0, 10, 2)
    s.step()
    s.step()
    assert s.chunked is s.reqs[0]
    assert s.abort(0) is True
    assert s.chunked is None
    check_integrity(s, pool)
    assert same(drain(s, pool), [[]])
    assert s.reqs[0].outputs == [] and s.reqs[0].finish_reason == "abort"
    assert pool.all_free()


def test_abort_running_but_not_in_flight():
    pool = StrictPool(2, 20)
    s = Scheduler(pool, page_size=4, chunk_size=4)
    s.add(0, 2, 5)
    s.step()  # 0 prefill
    s.step()  # 0 decode
    s.add(1, 3, 2)
    s.step()  # 1 prefill：这一步在路上的只有 1，0 在 running 里但不在路上
    assert same([r.uid for r, _ in s.in_flight], [1])
    assert s.abort(0) is True
    check_integrity(s, pool)
    assert same([r.uid for r in s.running], [1])
    steps = drain(s, pool)
    assert 0 not in uids(steps)
    assert same(s.reqs[0].outputs, [0, 1])
    assert s.reqs[1].outputs == [0, 1] and s.reqs[1].finish_reason == "length"
    assert pool.all_free()


def test_abort_in_flight_ignores_the_late_result():
    pool = StrictPool(2, 20)
    s = Scheduler(pool, page_size=4, chunk_size=4)
    s.add(0, 2, 5)
    s.add(1, 2, 5)
    for _ in range(4):
        s.step()
    assert same([r.uid for r, _ in s.in_flight], [0, 1])
    before = list(s.reqs[0].outputs)
    assert s.abort(0) is True
    check_integrity(s, pool)
    results = s.step()
    assert same([uid for uid, _, _ in results], [1])
    assert same(s.reqs[0].outputs, before)
    drain(s, pool)
    assert same(s.reqs[1].outputs, [0, 1, 2, 3, 4])
    assert pool.all_free()


def test_abort_while_the_last_chunk_is_in_flight():
    pool = StrictPool(1, 10)
    s = Scheduler(pool, page_size=4, chunk_size=4)
    s.add(0, 4, 3)
    s.step()  # 唯一的一块，带着采样
    assert s.abort(0) is True
    check_integrity(s, pool)
    assert same(drain(s, pool), [[]])
    assert same(s.reqs[0].outputs, [])
    assert pool.all_free()


def test_finish_then_abort_in_the_same_step():
    pool = StrictPool(1, 10)
    s = Scheduler(pool, page_size=4, chunk_size=4)
    s.add(0, 2, 2)
    s.step()
    s.step()
    assert same(s.step(), [(0, 1, True)])
    assert s.abort(0) is False  # 已经结束了：什么也不做
    assert same(s.reqs[0].finish_reason, "length")
    drain(s, pool)
    assert pool.all_free()


def test_abort_while_the_final_token_is_in_flight():
    pool = StrictPool(1, 10)
    s = Scheduler(pool, page_size=4, chunk_size=4)
    s.add(0, 2, 2)
    s.step()
    s.step()  # 第二个（最后一个）token 在路上
    assert s.abort(0) is True
    assert same(s.step(), [])  # 迟到的最后一个 token 不算
    assert same(s.reqs[0].outputs, [0])
    assert same(s.reqs[0].finish_reason, "abort")
    drain(s, pool)
    assert pool.all_free()


def test_abort_twice_and_unknown_uid():
    pool = StrictPool(1, 10)
    s = Scheduler(pool, page_size=4, chunk_size=4)
    s.add(0, 2, 4)
    s.step()
    assert s.abort(0) is True
    assert s.abort(0) is False
    assert s.abort(42) is False
    drain(s, pool)
    assert pool.all_free()


def test_row_reused_after_abort():
    # 只有一行：0 被中止后，行马上给了 1；0 迟到的结果不能影响 1，也不能再释放一次这一行
    pool = StrictPool(1, 8)
    s = Scheduler(pool, page_size=4, chunk_size=4)
    s.add(0, 3, 4)
    s.add(1, 3, 2)
    s.step()
    s.step()
    assert s.abort(0) is True
    steps = drain(s, pool)
    assert 0 not in uids(steps)
    assert same(s.reqs[1].outputs, [0, 1])
    assert pool.all_free()


def test_finished_request_extra_result_many_times():
    # PR #111 的回归：每个请求结束时都还有一个多余的结果在路上
    pool = StrictPool(3, 30)
    s = Scheduler(pool, page_size=2, chunk_size=3)
    for uid, (p, m) in enumerate([(1, 1), (4, 2), (2, 1), (5, 3), (3, 2)]):
        s.add(uid, p, m)
    steps = drain(s, pool)
    finals = [(uid, k) for step in steps for uid, k, done in step if done]
    assert same(sorted(finals), [(0, 0), (1, 1), (2, 0), (3, 2), (4, 1)])
    for r in s.reqs.values():
        assert same(r.outputs, list(range(r.max_tokens)))
    assert pool.all_free()


def test_random_abort_timing():
    rng = random.Random(111)
    for _ in range(150):
        rows, page_size = rng.randint(1, 3), rng.choice([1, 2, 4])
        pool = StrictPool(rows, 40)
        s = Scheduler(pool, page_size=page_size, chunk_size=rng.randint(1, 5))
        n = rng.randint(1, 7)
        spec = {uid: (rng.randint(1, 9), rng.randint(1, 5)) for uid in range(n)}
        for uid, (p, m) in spec.items():
            s.add(uid, p, m)
        aborted_at = {}
        finals = {}
        seen = {uid: [] for uid in spec}
        step = 0
        while not s.idle():
            for uid in spec:
                if rng.random() < 0.06:
                    was_live = not s.reqs[uid].finished
                    assert s.abort(uid) is was_live
                    if was_live:
                        aborted_at[uid] = step
            check_integrity(s, pool)
            for uid, k, done in s.step():
                assert uid not in aborted_at, f"请求 {uid} 中止之后还有结果"
                assert uid not in finals, f"请求 {uid} 结束之后还有结果"
                seen[uid].append(k)
                if done:
                    finals[uid] = k
            check_integrity(s, pool)
            step += 1
            assert step < 300, "跑了太多步还没结束"
        assert pool.all_free()
        for uid, (_, m) in spec.items():
            r = s.reqs[uid]
            assert r.finished and r.row is None and r.pages == []
            assert seen[uid] == r.outputs == list(range(len(r.outputs)))
            if uid in aborted_at:
                assert r.finish_reason == "abort" and uid not in finals
                assert len(r.outputs) < m
            else:
                assert r.finish_reason == "length" and finals[uid] == m - 1
                assert same(r.outputs, list(range(m)))
