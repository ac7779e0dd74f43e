"""第 10 章：radix 树本身——匹配、切分、插入、加锁、LRU 淘汰，以及一个真的会失败的完整性检查。"""

from __future__ import annotations

import random

import pytest

from minisgl.kvcache import CacheHandle, RadixPrefixCache


def test_empty_tree_matches_nothing() -> None:
    tree = RadixPrefixCache(page_size=1)
    handle, pages = tree.match_prefix([1, 2, 3])
    assert handle.cached_len == 0 and pages == []
    assert tree.size_info == (0, 0)


def test_insert_then_match_and_split_in_the_middle() -> None:
    tree = RadixPrefixCache(page_size=2)
    tree.insert_prefix([1, 2, 3, 4, 5, 6], [10, 11, 12])
    handle, pages = tree.match_prefix([1, 2, 3, 4, 5, 6, 7])
    assert (handle.cached_len, pages) == (6, [10, 11, 12])
    # 只有前 4 个相同：节点在第 4 个 token 处切开，匹配 2 页
    handle, pages = tree.match_prefix([1, 2, 3, 4, 9, 9])
    assert (handle.cached_len, pages) == (4, [10, 11])
    assert len(tree.root.children) == 1
    (upper,) = tree.root.children.values()
    assert upper.key == [1, 2, 3, 4] and [c.key for c in upper.children.values()] == [[5, 6]]
    # 半页相同不算：[1, 2, 3, 9] 只匹配第一页
    handle, pages = tree.match_prefix([1, 2, 3, 9])
    assert (handle.cached_len, pages) == (2, [10])
    tree.check_integrity()
    assert tree.size_info == (3, 0)


def test_insert_keeps_existing_pages_and_adds_only_the_new_tail() -> None:
    tree = RadixPrefixCache(page_size=1)
    tree.insert_prefix([1, 2, 3], [7, 8, 9])
    tree.insert_prefix([1, 2, 3, 4, 5], [20, 21, 22, 23, 24])  # 前 3 个已经有了
    handle, pages = tree.match_prefix([1, 2, 3, 4, 5])
    assert pages == [7, 8, 9, 23, 24]  # 已有的不动；调用方发现 20、21、22 是重复的，自己释放
    assert sorted(tree.cached_pages()) == [7, 8, 9, 23, 24]
    with pytest.raises(ValueError, match="whole pages"):
        RadixPrefixCache(page_size=4).insert_prefix([1, 2, 3], [5])
    tree.check_integrity()


def test_locked_nodes_are_never_evicted_and_parents_become_leaves() -> None:
    tree = RadixPrefixCache(page_size=1)
    tree.insert_prefix([1, 2], [0, 1])
    tree.insert_prefix([1, 2, 3, 4], [0, 1, 2, 3])
    tree.insert_prefix([1, 2, 5], [0, 1, 4])
    tree.insert_prefix([9], [5])
    handle, _ = tree.match_prefix([1, 2, 5])  # 锁住 [1,2] 和 [5]
    tree.lock(handle)
    assert tree.size_info == (3, 3)
    tree.match_prefix([9])  # 最近用过 [9]
    # 最久没用的没加锁的叶子是 [3, 4]；它的父节点 [1, 2] 被锁着，不会跟着被淘汰
    assert tree.evict(1) == [2, 3]
    assert tree.evict(10) == [5]
    assert tree.size_info == (0, 3)
    tree.unlock(handle)
    assert tree.size_info == (3, 0)
    assert sorted(tree.evict(10)) == [0, 1, 4]  # 叶子没了，父节点变成叶子，也被淘汰
    assert tree.cached_pages() == [] and tree.size_info == (0, 0)
    with pytest.raises(RuntimeError, match="stale handle"):
        tree.unlock(handle)


def test_split_keeps_the_lock_on_both_halves() -> None:
    tree = RadixPrefixCache(page_size=1)
    tree.insert_prefix([1, 2, 3, 4], [0, 1, 2, 3])
    handle, _ = tree.match_prefix([1, 2, 3, 4])
    tree.lock(handle)
    tree.match_prefix([1, 2, 7])  # 把被锁的节点切开
    tree.check_integrity()
    assert tree.evict(10) == []  # 两半都被锁着
    tree.unlock(handle)
    assert tree.size_info == (4, 0)
    tree.check_integrity()


def test_integrity_check_catches_corruption() -> None:
    tree = RadixPrefixCache(page_size=1)
    tree.insert_prefix([1, 2, 3], [0, 1, 2])
    tree.insert_prefix([1, 5], [0, 3])
    tree.check_integrity()
    tree._evictable += 1
    with pytest.raises(RuntimeError, match="size counters"):
        tree.check_integrity()
    tree._evictable -= 1
    leaf = tree.match_prefix([1, 5])[0].node
    leaf.pages = [1]  # 同一页出现在两个节点上
    with pytest.raises(RuntimeError, match="two nodes"):
        tree.check_integrity()
    leaf.pages = [3]
    leaf.parent.ref_count = 0
    leaf.ref_count = 1  # 孩子被锁，父亲却没有
    with pytest.raises(RuntimeError, match="children"):
        tree.check_integrity()


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("page_size", [1, 2])
def test_random_operations_keep_every_page_accounted_for(seed: int, page_size: int) -> None:
    """随机的插入 / 匹配 / 加锁 / 解锁 / 淘汰：每一步之后树的账目都对，而且和"空闲池"加起来
    正好是全部的页（像调度器那样：插入时重复的页还回空闲池）。"""
    rng = random.Random(seed)
    num_pages = 40
    tree = RadixPrefixCache(page_size)
    free = list(range(num_pages))
    locks: list[CacheHandle] = []
    for _ in range(300):
        op = rng.random()
        if op < 0.45:
            n_pages = rng.randint(1, 5)
            ids = [rng.randint(0, 2) for _ in range(n_pages * page_size)]  # 小字母表：前缀常常相同
            if len(free) < n_pages:
                free += tree.evict(n_pages - len(free))
            if len(free) < n_pages:
                continue
            mine = [free.pop() for _ in range(n_pages)]
            tree.insert_prefix(ids, mine)
            _, pages = tree.match_prefix(ids)
            assert len(pages) == n_pages
            free += [p for p, q in zip(mine, pages) if p != q]  # 重复的页
        elif op < 0.7:
            ids = [rng.randint(0, 2) for _ in range(rng.randint(0, 12))]
            handle, pages = tree.match_prefix(ids)
            assert handle.cached_len == len(pages) * page_size <= len(ids)
            if rng.random() < 0.5:
                tree.lock(handle)
                locks.append(handle)
        elif op < 0.85 and locks:
            tree.unlock(locks.pop(rng.randrange(len(locks))))
        else:
            evictable_before, _ = tree.size_info
            got = tree.evict(rng.randint(1, 6))
            assert len(got) <= evictable_before
            free += got
        tree.check_integrity()
        cached = tree.cached_pages()
        assert sorted(cached + free) == list(range(num_pages))
        assert sum(tree.size_info) == len(cached)
    for handle in locks:
        tree.unlock(handle)
    free += tree.evict(num_pages)
    assert sorted(free) == list(range(num_pages)) and tree.size_info == (0, 0)
