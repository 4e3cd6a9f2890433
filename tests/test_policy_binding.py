"""The per-access policy binding: names, output shape, and input errors."""

import pytest

from blocklab import BlocklabError, _core

ALL = ["lru", "fifo", "lfu", "clock", "sieve", "arc", "2q", "lirs", "s3fifo", "lru2", "mq", "opt"]


def test_every_policy_is_listed() -> None:
    assert sorted(_core.policy_names()) == sorted(ALL)


@pytest.mark.parametrize("name", ALL)
def test_one_byte_per_access(name: str) -> None:
    blocks = [1, 2, 1, 3, 1, 2]
    nxt = [2, 5, 4, -1, -1, -1]
    out = _core.policy_hits(name, 2, blocks, nxt)
    assert isinstance(out, bytes) and len(out) == len(blocks)
    assert set(out) <= {0, 1}
    assert out[0] == 0 and out[1] == 0 and out[2] == 1  # 1 is still cached


def test_lru_by_hand() -> None:
    assert list(_core.policy_hits("lru", 2, [1, 2, 1, 3, 2, 1])) == [0, 0, 1, 0, 0, 0]


def test_bad_inputs_raise_blocklab_errors() -> None:
    with pytest.raises(BlocklabError, match="lru"):
        _core.policy_hits("nope", 2, [1], None)
    with pytest.raises(BlocklabError):
        _core.policy_hits("lru", 0, [1], None)
    with pytest.raises(BlocklabError, match="next_use"):
        _core.policy_hits("opt", 2, [1, 2], [1])
