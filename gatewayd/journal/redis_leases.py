"""Partition leases of the Redis queue: which instance owns which partition, and for how long.

A partition is owned through its key ``<ns>:lease:<i>`` holding the owner's instance id with a
TTL of ``gateway.queue.redis.leaseMs``. Every ``leaseMs / 3`` an instance (:meth:`Leases.tick`):

1. registers itself in ``<ns>:instances`` (expiring ``leaseMs`` from now) and drops expired
   registrations, which gives the live instances and so its fair share: ``partitions // live``,
   plus one for the first ``partitions % live`` instances by id (the shares add up exactly);
2. renews its leases (a script: only where the key still names it);
3. takes free partitions (a script: ``SET`` where the key is absent or names it) up to its fair
   share, or offers back the ones above it: those are *released* once their events in hand are
   done (the caller drains them first, so order holds across the hand-over).

Ownership is also bounded locally: an instance treats a lease as lost once ``leaseMs`` minus a
safety margin passed since the renewal that last succeeded was *sent*, before the key can
expire in Redis, so two live instances never both read a partition.

Each step is a single round trip; every call raises the client's ``ConnectionError`` (or
``TimeoutError``) when Redis is unreachable, which the caller turns into a reconnect with backoff.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

from gatewayd.journal.redis_codec import Keys

SAFETY = 0.2
"""Part of ``leaseMs`` an owner gives up early (clock-rate drift, a slow round trip)."""

_RENEW = """
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2]); out[i] = 1
  else out[i] = 0 end
end
return out
"""
_ACQUIRE = """
local got, want = {}, tonumber(ARGV[3])
for i, key in ipairs(KEYS) do
  if #got >= want then break end
  local v = redis.call('GET', key)
  if v == false or v == ARGV[1] then
    redis.call('SET', key, ARGV[1], 'PX', ARGV[2]); got[#got + 1] = i
  end
end
return got
"""
_RELEASE = """
local n = 0
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key); n = n + 1 end
end
return n
"""


class Leases:
    """This instance's leases; see the module docstring. Use on the event loop only."""

    def __init__(
        self, client: Any, keys: Keys, instance: str, partitions: int, lease_ms: int
    ) -> None:
        self.client = client
        self.keys = keys
        self.instance = instance
        self.partitions = partitions
        self.lease_ms = lease_ms
        self.owned: dict[int, float] = {}
        """Partition -> monotonic time until which this instance may dispatch it."""
        self.live = 1
        self.fair = partitions
        self._renew = client.register_script(_RENEW)
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)
        # Where this instance starts looking for free partitions: spread over instances.
        self._offset = zlib.crc32(instance.encode()) % partitions

    def valid(self, partition: int) -> bool:
        """True while this instance may read and dispatch ``partition``."""
        until = self.owned.get(partition)
        return until is not None and time.monotonic() < until

    def expire(self) -> list[int]:
        """Forget leases whose local bound passed (no renewal got through): the lost ones."""
        now = time.monotonic()
        lost = [p for p, until in self.owned.items() if until <= now]
        for partition in lost:
            del self.owned[partition]
        return lost

    async def tick(self, draining: set[int]) -> tuple[list[int], list[int], list[int]]:
        """One round: ``(gained, lost, surplus)``. ``surplus``: owned partitions above the fair
        share that are not being drained yet (the caller drains, then :meth:`release`)."""
        sent = time.monotonic()
        now_ms = int(time.time() * 1000)
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(self.keys.instances, {self.instance: now_ms + self.lease_ms})
        pipe.zremrangebyscore(self.keys.instances, "-inf", now_ms)
        pipe.zrange(self.keys.instances, 0, -1)
        _, _, members = await pipe.execute()
        names = sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)
        self.live = max(1, len(names))
        rank = names.index(self.instance) if self.instance in names else 0
        # Quotas that add up to the partition count: the first (partitions mod live)
        # instances by id take one more than the rest.
        base, extra = divmod(self.partitions, self.live)
        self.fair = base + (1 if rank < extra else 0)
        until = sent + self.lease_ms / 1000 * (1 - SAFETY)
        lost: list[int] = []
        mine = sorted(self.owned)
        if mine:
            kept = await self._renew(
                keys=[self.keys.lease(p) for p in mine], args=[self.instance, self.lease_ms]
            )
            for partition, ok in zip(mine, kept, strict=True):
                if ok:
                    self.owned[partition] = until
                else:
                    lost.append(partition)
                    del self.owned[partition]
        lost += self.expire()
        gained: list[int] = []
        want = self.fair - len(self.owned)
        if want > 0:
            order = [(self._offset + i) % self.partitions for i in range(self.partitions)]
            free = [p for p in order if p not in self.owned]
            got = await self._acquire(
                keys=[self.keys.lease(p) for p in free],
                args=[self.instance, self.lease_ms, want],
            )
            for index in got:
                partition = free[int(index) - 1]
                self.owned[partition] = until
                gained.append(partition)
        keep = len(self.owned) - len(draining & self.owned.keys())
        surplus = [p for p in sorted(self.owned, reverse=True) if p not in draining]
        surplus = surplus[: max(0, keep - self.fair)]
        return gained, lost, surplus

    async def release(self, partitions: list[int]) -> None:
        """Give ``partitions`` up now (their events in hand are done)."""
        for partition in partitions:
            self.owned.pop(partition, None)
        if partitions:
            await self._release(keys=[self.keys.lease(p) for p in partitions], args=[self.instance])

    async def leave(self) -> None:
        """Release every lease and the registration (a clean shutdown): others take over now."""
        owned = list(self.owned)
        await self.release(owned)
        await self.client.zrem(self.keys.instances, self.instance)
