"""052 的隐藏测试：锁住的缓存页、共享前缀、每一种不合法的操作、泄漏的页不能再用、随机日志。"""

import random

from solution import AccountingError, Books, audit, is_idle


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


def error_index(num_pages, num_rows, log):
    try:
        audit(num_pages, num_rows, log)
    except AccountingError as e:
        head = str(e).split(":", 1)[0]
        assert head.startswith("event "), str(e)
        return int(head.removeprefix("event "))
    return None


def test_books_while_running():
    log = [
        ("admit", 1, 0, [0, 1], []),
        ("end", 1, [0, 1], []),
        ("admit", 2, 1, [2, 3], [0]),  # 命中 0：锁住
        ("alloc", 2, [4]),
    ]
    books = audit(6, 2, log)
    assert same(
        books, Books(free=1, cached=1, locked=1, held=3, leaked=(), running=(2,), rows_free=1)
    )
    assert not is_idle(books, 6, 2)
    assert same(books.free + books.cached + books.locked + books.held + len(books.leaked), 6)


def test_locked_page_cannot_be_evicted():
    log = [
        ("admit", 1, 0, [0], []),
        ("end", 1, [0], []),
        ("admit", 2, 0, [1], [0]),
        ("evict", [0]),
    ]
    assert same(error_index(4, 1, log), 3)
    assert error_index(4, 1, log[:3] + [("end", 2, [], [1]), ("evict", [0])]) is None


def test_shared_prefix_is_locked_until_the_last_user_ends():
    base = [("admit", 1, 0, [0, 1], []), ("end", 1, [0, 1], [])]
    two = base + [("admit", 2, 0, [2], [0, 1]), ("admit", 3, 1, [3], [0])]
    books = audit(5, 2, two)
    assert same((books.cached, books.locked, books.held), (0, 2, 2))
    after_2 = two + [("end", 2, [], [2])]
    books = audit(5, 2, after_2)
    assert same((books.cached, books.locked), (1, 1))  # 1 解锁了，0 还被 3 锁着
    assert same(error_index(5, 2, after_2 + [("evict", [0])]), 5)
    done = after_2 + [("end", 3, [3], []), ("evict", [0, 1])]
    books = audit(5, 2, done)
    assert same(
        books, Books(free=4, cached=1, locked=0, held=0, leaked=(), running=(), rows_free=2)
    )
    assert is_idle(books, 5, 2)


def test_every_kind_of_bad_event():
    ok = [("admit", 1, 0, [0, 1], [])]
    cases = [
        ok + [("admit", 2, 0, [2], [])],  # 行被占着
        ok + [("admit", 2, 5, [2], [])],  # 行越界
        ok + [("admit", 2, 1, [1], [])],  # 页被别人拿着
        ok + [("admit", 2, 1, [9], [])],  # 页越界
        ok + [("admit", 2, 1, [2, 2], [])],  # 同一页两次
        ok + [("admit", 2, 1, [2], [3])],  # 命中的页不在缓存里
        ok + [("admit", 1, 1, [2], [])],  # uid 已经在跑
        ok + [("alloc", 2, [2])],  # uid 不在跑
        ok + [("alloc", 1, [0])],  # 已经是自己的页
        ok + [("end", 1, [0], [0])],  # 同一页既进缓存又还回去
        ok + [("end", 1, [0, 2], [])],  # 2 不是它的
        ok + [("end", 2, [], [])],  # uid 不在跑
        ok + [("evict", [0])],  # 0 被持有，不在缓存里
        ok + [("evict", [3])],  # 空闲页谈不上淘汰
        ok + [("forget", 1)],  # 不认识的事件
    ]
    for log in cases:
        assert same(error_index(4, 2, log), 1), log


def test_uid_and_row_reuse():
    log = [("admit", 1, 0, [0], []), ("end", 1, [], [0]), ("admit", 2, 0, [0], [])]
    assert error_index(2, 1, log) is None  # 行和页都可以再用
    assert same(error_index(2, 1, log[:2] + [("admit", 1, 0, [0], [])]), 2)  # uid 不能


def test_leaked_page_is_gone_for_good():
    log = [("admit", 1, 0, [0, 1], []), ("end", 1, [0], [])]
    books = audit(3, 1, log)
    assert books.leaked == (1,) and books.free == 1 and books.cached == 1
    assert same(error_index(3, 1, log + [("admit", 2, 0, [1], [])]), 2)  # 泄漏的页不空闲
    assert same(error_index(3, 1, log + [("evict", [1])]), 2)  # 也不在缓存里
    assert same(error_index(3, 1, log + [("end", 1, [], [1])]), 2)  # 事后补还也不行：它已经结束了


def test_empty_log_and_a_request_that_never_ends():
    assert same(audit(3, 2, []), Books(3, 0, 0, 0, (), (), 2))
    assert is_idle(audit(3, 2, []), 3, 2)
    # 中止消息丢了：请求一直在跑，行和页都回不来
    books = audit(3, 2, [("admit", 7, 1, [2], [])])
    assert books.running == (7,) and books.rows_free == 1 and not is_idle(books, 3, 2)


def test_is_idle_needs_all_three_conditions():
    assert is_idle(Books(3, 1, 0, 0, (), (), 2), 4, 2)
    assert not is_idle(Books(3, 0, 0, 0, (1,), (), 2), 4, 2)  # 泄漏了一页
    assert not is_idle(Books(3, 1, 0, 0, (), (), 1), 4, 2)  # 少一行
    assert not is_idle(Books(3, 0, 1, 0, (), (5,), 1), 4, 2)  # 还有请求在跑


class Model:
    """随机日志的生成器：自己记一份正确的账，可以故意漏还一页，或者在某一步插入一个不合法的事件。"""

    def __init__(self, rng, num_pages, num_rows):
        self.rng, self.num_pages, self.num_rows = rng, num_pages, num_rows
        self.free = set(range(num_pages))
        self.cache = {}  # page -> locks
        self.leaked = set()
        self.rows = set(range(num_rows))
        self.live = {}  # uid -> [row, held, hits]
        self.ended = []
        self.next_uid = 100

    def valid_event(self, leak_p):
        rng = self.rng
        options = []
        if self.rows and self.free:
            options.append("admit")
        if self.live and self.free:
            options.append("alloc")
        if self.live:
            options += ["end", "end"]
        if any(v == 0 for v in self.cache.values()):
            options.append("evict")
        if not options:
            return None
        kind = rng.choice(options)
        if kind == "admit":
            uid, self.next_uid = self.next_uid, self.next_uid + 1
            row = rng.choice(sorted(self.rows))
            pages = rng.sample(sorted(self.free), rng.randint(1, min(3, len(self.free))))
            hits = rng.sample(sorted(self.cache), rng.randint(0, min(2, len(self.cache))))
            self.rows.discard(row)
            self.free -= set(pages)
            for p in hits:
                self.cache[p] += 1
            self.live[uid] = [row, list(pages), hits]
            return ("admit", uid, row, pages, hits)
        if kind == "alloc":
            uid = rng.choice(sorted(self.live))
            page = rng.choice(sorted(self.free))
            self.free.discard(page)
            self.live[uid][1].append(page)
            return ("alloc", uid, [page])
        if kind == "end":
            uid = rng.choice(sorted(self.live))
            row, held, hits = self.live.pop(uid)
            held = list(held)
            rng.shuffle(held)
            if held and rng.random() < leak_p:
                self.leaked.add(held.pop())
            cut = rng.randint(0, len(held))
            to_cache, to_free = held[:cut], held[cut:]
            for p in hits:
                self.cache[p] -= 1
            for p in to_cache:
                self.cache[p] = 0
            self.free |= set(to_free)
            self.rows.add(row)
            self.ended.append(uid)
            return ("end", uid, to_cache, to_free)
        unlocked = sorted(p for p, n in self.cache.items() if n == 0)
        pages = rng.sample(unlocked, rng.randint(1, len(unlocked)))
        for p in pages:
            del self.cache[p]
        self.free |= set(pages)
        return ("evict", pages)

    def bad_event(self):
        rng = self.rng
        bad = []
        if self.ended:
            bad.append(("end", rng.choice(self.ended), [], []))  # 结束两次
            bad.append(("admit", rng.choice(self.ended), 0, [], []))  # uid 再用
        if any(n > 0 for n in self.cache.values()):
            bad.append(("evict", [rng.choice(sorted(p for p, n in self.cache.items() if n))]))
        if self.live:
            uid = rng.choice(sorted(self.live))
            others = [p for u, v in self.live.items() if u != uid for p in v[1]]
            if others:
                bad.append(("end", uid, [rng.choice(others)], []))  # 还别人的页
            bad.append(("alloc", uid, [rng.choice(self.live[uid][1])]))  # 自己已经拿着
        if self.leaked:
            bad.append(("evict", [rng.choice(sorted(self.leaked))]))
        return rng.choice(bad) if bad else None

    def books(self):
        held = sum(len(v[1]) for v in self.live.values())
        return Books(
            free=len(self.free),
            cached=sum(1 for n in self.cache.values() if n == 0),
            locked=sum(1 for n in self.cache.values() if n > 0),
            held=held,
            leaked=tuple(sorted(self.leaked)),
            running=tuple(sorted(self.live)),
            rows_free=len(self.rows),
        )


def test_random_valid_logs():
    rng = random.Random(52)
    for trial in range(200):
        num_pages, num_rows = rng.randint(1, 12), rng.randint(1, 4)
        model = Model(rng, num_pages, num_rows)
        leak_p = 0.0 if trial % 2 else 0.2
        log = []
        for _ in range(rng.randint(0, 40)):
            event = model.valid_event(leak_p)
            if event is None:
                break
            log.append(event)
        if trial % 3 == 0:  # 收尾：所有请求结束，再淘汰全部缓存
            while model.live:
                uid = sorted(model.live)[0]
                row, held, hits = model.live.pop(uid)
                for p in hits:
                    model.cache[p] -= 1
                model.free |= set(held)
                model.rows.add(row)
                log.append(("end", uid, [], list(held)))
        books = audit(num_pages, num_rows, log)
        assert same(books, model.books()), log
        total = books.free + books.cached + books.locked + books.held + len(books.leaked)
        assert same(total, num_pages)
        expect_idle = not model.live and not model.leaked and books.locked == 0
        assert same(is_idle(books, num_pages, num_rows), expect_idle)


def test_random_bad_event_is_reported_at_its_index():
    rng = random.Random(1752)
    checked = 0
    for _ in range(300):
        model = Model(rng, rng.randint(2, 12), rng.randint(1, 4))
        log = []
        for _ in range(rng.randint(1, 30)):
            event = model.valid_event(0.3)
            if event is None:
                break
            log.append(event)
        bad = model.bad_event()
        if bad is None:
            continue
        log.append(bad)
        assert same(error_index(model.num_pages, model.num_rows, log), len(log) - 1), log
        checked += 1
    assert checked > 100
