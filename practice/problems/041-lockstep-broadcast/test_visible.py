"""041 的可见测试。"""

from collections import deque

from solution import RankIO, to_commands


class Group:
    """集合通信：rank r 的第 k 次广播得到 rank 0 第 k 次广播的值。"""

    def __init__(self, size):
        self.size = size
        self.values = []
        self.calls = [0] * size


class Comm:
    def __init__(self, group, rank):
        self.group, self.rank, self.size = group, rank, group.size

    def broadcast(self, value):
        g = self.group
        k = g.calls[self.rank]
        g.calls[self.rank] += 1
        if self.rank == 0:
            assert isinstance(value, int), f"rank 0 要广播一个 int，得到 {value!r}"
            g.values.append(value)
            return value
        if k >= len(g.values):
            raise RuntimeError(f"死锁：rank {self.rank} 进入第 {k + 1} 次广播，rank 0 还没有")
        return g.values[k]


class Inbox:
    def __init__(self):
        self.frames = deque()

    def poll(self):
        return bool(self.frames)

    def recv(self):
        if not self.frames:
            raise RuntimeError("inbox 里没有帧：先 poll()")
        return self.frames.popleft()


class Net:
    """rank 0 → 其他 rank 的链路。帧发出后在路上，deliver 或阻塞的 recv 才让它到达。"""

    def __init__(self, size):
        self.sent = []
        self.on_the_way = {r: deque() for r in range(1, size)}
        self.arrived = {r: deque() for r in range(1, size)}

    def deliver_all(self):
        for r, q in self.on_the_way.items():
            self.arrived[r].extend(q)
            q.clear()


class Pub:
    def __init__(self, net):
        self.net = net

    def send(self, raw):
        assert isinstance(raw, bytes), f"转发的应当是原始字节，得到 {type(raw).__name__}"
        self.net.sent.append(raw)
        for q in self.net.on_the_way.values():
            q.append(raw)


class Sub:
    def __init__(self, net, rank):
        self.net, self.rank = net, rank

    def poll(self):
        return bool(self.net.arrived[self.rank])

    def recv(self):
        if not self.net.arrived[self.rank]:
            if not self.net.on_the_way[self.rank]:
                raise RuntimeError(f"死锁：rank {self.rank} 在等一帧 rank 0 从没发过的消息")
            self.net.arrived[self.rank].append(self.net.on_the_way[self.rank].popleft())
        return self.net.arrived[self.rank].popleft()


def make_cluster(size):
    group, net, inbox = Group(size), Net(size), Inbox()
    ranks = [RankIO(Comm(group, 0), inbox=inbox, pub=Pub(net) if size > 1 else None)]
    ranks += [RankIO(Comm(group, r), sub=Sub(net, r)) for r in range(1, size)]
    return ranks, inbox, net, group


def step(ranks, group):
    got = [io.receive() for io in ranks]
    assert len(set(group.calls)) == 1, f"每个 rank 每一步都要参加一次广播，调用次数 {group.calls}"
    return got


def user(uid):
    return b'{"type": "user", "uid": %d}' % uid


def test_to_commands_examples():
    assert to_commands(user(3)) == ["user 3"]
    assert to_commands(b'{"type": "abort", "uid": 3}') == ["abort 3"]
    assert to_commands(b'{"type": "exit"}') == ["exit"]
    batch = b'{"type": "batch", "data": [{"type": "user", "uid": 1}, {"type": "abort", "uid": 0}]}'
    assert to_commands(batch) == ["user 1", "abort 0"]
    for bad in [b"garbage", b"[1, 2]", b'{"type": "user", "uid": "3"}', b'{"type": "nope"}']:
        try:
            to_commands(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} 应当抛出 ValueError")


def test_example_from_statement():
    ranks, inbox, net, group = make_cluster(2)
    inbox.frames.extend(
        [
            user(0),
            b"garbage",
            b'{"type": "batch", "data": [{"type": "user", "uid": 1}, {"type": "abort", "uid": 0}]}',
        ]
    )
    got = step(ranks, group)  # 链路很慢：rank 1 的 sub 里一帧都还没到
    assert got == [["user 0", "user 1", "abort 0"]] * 2
    assert [io.dropped for io in ranks] == [1, 1]
    assert step(ranks, group) == [[], []]


def test_fast_network_three_steps():
    ranks, inbox, net, group = make_cluster(3)
    for frames in [[user(0), user(1)], [], [user(2), b'{"type": "exit"}']]:
        inbox.frames.extend(frames)
        got = step(ranks, group)
        net.deliver_all()
        assert got[1] == got[0] and got[2] == got[0]
    assert got[0] == ["user 2", "exit"]


def test_slow_network_does_not_split_the_ranks():
    ranks, inbox, net, group = make_cluster(2)
    inbox.frames.extend([user(0), user(1)])
    assert step(ranks, group) == [["user 0", "user 1"]] * 2
    inbox.frames.append(user(2))
    assert step(ranks, group) == [["user 2"]] * 2
