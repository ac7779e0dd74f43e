"""033 的可见测试。"""

from solution import Scheduler


class StrictPool:
    """和题面里的 Pool 一样：重复释放、释放没分配的、往没分配的行/页里写，都抛 RuntimeError。"""

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


def drain(s, limit=100):
    steps = []
    while not s.idle():
        steps.append(s.step())
        assert len(steps) < limit, "跑了太多步还没结束"
    return steps


def test_example_without_abort():
    pool = StrictPool(2, 20)
    s = Scheduler(pool, page_size=4, chunk_size=4)
    s.add(0, 6, 3)
    s.add(1, 2, 2)
    assert drain(s) == [
        [],
        [],
        [(0, 0, False)],
        [(1, 0, False)],
        [(0, 1, False), (1, 1, True)],
        [(0, 2, True)],
        [],
    ]
    assert [(r.outputs, r.finish_reason) for r in s.reqs.values()] == [
        ([0, 1, 2], "length"),
        ([0, 1], "length"),
    ]
    assert pool.all_free()


def test_one_token_request_is_freed_once():
    # max_tokens = 1：第一个 token 还在路上时它已经进了 decode 批次——多出来的结果要丢掉
    pool = StrictPool(1, 4)
    s = Scheduler(pool, page_size=2, chunk_size=8)
    s.add(7, 3, 1)
    assert drain(s) == [[], [(7, 0, True)], []]
    assert pool.all_free()


def test_abort_while_waiting():
    pool = StrictPool(1, 20)
    s = Scheduler(pool, page_size=4, chunk_size=4)
    s.add(0, 2, 2)
    s.add(1, 2, 2)
    s.step()
    assert s.abort(1) is True
    assert s.reqs[1].finish_reason == "abort"
    steps = drain(s)
    assert all(uid == 0 for step in steps for uid, _, _ in step)
    assert s.reqs[1].outputs == []
    assert pool.all_free()
