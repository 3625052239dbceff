"""Seeded random step DAGs, and the bounds any scheduler of them is measured against."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from soothe_planner.models import AgentDecision, StepAction


@dataclass
class RandomDag:
    """Steps ``s0..s{n-1}`` in layers; ``deps[i]`` are earlier steps; ``cost[i]`` the step's duration."""

    name: str
    deps: list[list[int]]
    cost: list[float]

    @property
    def n(self) -> int:
        return len(self.deps)

    def critical_path(self) -> float:
        finish = [0.0] * self.n
        for i in range(self.n):  # ids are in topological order by construction
            finish[i] = self.cost[i] + max((finish[d] for d in self.deps[i]), default=0.0)
        return max(finish, default=0.0)

    def total_work(self) -> float:
        return sum(self.cost)

    def bound(self, parallel: int | None) -> float:
        """A lower bound on any schedule's makespan with ``parallel`` workers (None = unlimited)."""
        cp = self.critical_path()
        return cp if not parallel else max(cp, self.total_work() / parallel)

    def levels(self) -> list[list[int]]:
        """Steps grouped by longest-path depth: the waves a superstep scheduler runs."""
        depth = [0] * self.n
        for i in range(self.n):
            depth[i] = 1 + max((depth[d] for d in self.deps[i]), default=-1)
        out: list[list[int]] = [[] for _ in range(max(depth, default=-1) + 1)]
        for i, d in enumerate(depth):
            out[d].append(i)
        return out

    def decision(self, *, tool: str | None = None) -> AgentDecision:
        steps = [
            StepAction(
                id=f"s{i}",
                description=f"step {i}",
                tools=[tool] if tool else [],
                depends_on=[f"s{d}" for d in self.deps[i]],
                execution_hint="tool" if tool else "auto",
            )
            for i in range(self.n)
        ]
        return AgentDecision(type="execute_steps", steps=steps, execution_mode="dependency")


def random_dag(
    n: int,
    *,
    layers: int,
    seed: int,
    max_deps: int = 3,
    sigma: float = 1.0,
    name: str = "",
) -> RandomDag:
    """A layered DAG of ``n`` steps with lognormal(0, sigma) costs (mean normalised to 1.0).

    Each step past the first layer depends on 1..max_deps steps, mostly from the layer just
    before it (so depth is close to ``layers``), sometimes from any earlier one (long edges).
    """
    rng = random.Random(seed)
    layers = max(1, min(layers, n))
    cuts = sorted(rng.sample(range(1, n), layers - 1)) if layers > 1 else []
    bounds = [0, *cuts, n]
    deps: list[list[int]] = []
    layer_of: list[int] = []
    for li in range(layers):
        for _ in range(bounds[li], bounds[li + 1]):
            layer_of.append(li)
            if li == 0:
                deps.append([])
                continue
            prev = list(range(bounds[li - 1], bounds[li]))
            k = rng.randint(1, max_deps)
            chosen = {rng.choice(prev)}
            for _ in range(k - 1):
                chosen.add(rng.choice(prev) if rng.random() < 0.7 else rng.randrange(0, bounds[li]))
            deps.append(sorted(chosen))
    raw = [rng.lognormvariate(0.0, sigma) for _ in range(n)]
    mean = sum(raw) / n
    return RandomDag(name or f"n{n}-L{layers}-s{seed}", deps, [c / mean for c in raw])


def bottom_levels(dag: RandomDag) -> list[float]:
    """Each step's longest path to the end of the DAG, its own cost included."""
    children: list[list[int]] = [[] for _ in range(dag.n)]
    for i, ds in enumerate(dag.deps):
        for d in ds:
            children[d].append(i)
    level = [0.0] * dag.n
    for i in reversed(range(dag.n)):
        level[i] = dag.cost[i] + max((level[c] for c in children[i]), default=0.0)
    return level


def path_lengths(dag: RandomDag) -> list[int]:
    """Each step's longest path to the end of the DAG in steps (itself included): the executor's
    priority, which cannot know durations in advance."""
    return [round(x) for x in bottom_levels(with_costs(dag, [1.0] * dag.n))]


def with_costs(dag: RandomDag, cost: list[float]) -> RandomDag:
    """The same DAG with other step durations (e.g. the ones a run actually measured)."""
    if len(cost) != dag.n:
        raise ValueError(f"with_costs needs one cost per step: got {len(cost)} for {dag.n} steps")
    return RandomDag(dag.name, dag.deps, list(cost))


def list_schedule(
    dag: RandomDag, parallel: int | None, *, critical_first: bool = False, by_step_count: bool = False
) -> float:
    """Makespan of greedy FIFO list scheduling with zero overhead: the executor's policy, idealised.

    A step joins the back of the queue the moment its last dependency finishes (ties in id order),
    and a free worker takes the front. With unlimited workers this equals the critical path; with
    p workers it can exceed max(critical path, work / p), because FIFO does not favour the steps on
    the critical path. The gap between this and the measured makespan is pure overhead.
    ``critical_first`` instead takes the ready step with the longest path to the end (HLFET), the
    classic fix for that; ``by_step_count`` measures that path in steps rather than durations (what
    the executor does, since it cannot know durations in advance; ties go to the lower id).
    """
    import heapq

    prio: list[float] | None = None
    if critical_first:
        prio = [float(x) for x in path_lengths(dag)] if by_step_count else bottom_levels(dag)

    waiting = [len(d) for d in dag.deps]
    children: list[list[int]] = [[] for _ in range(dag.n)]
    for i, ds in enumerate(dag.deps):
        for d in ds:
            children[d].append(i)
    fifo: deque[int] = deque()
    pq: list[tuple[float, int]] = []

    def push(i: int) -> None:
        if prio is None:
            fifo.append(i)
        else:
            heapq.heappush(pq, (-prio[i], i))

    def pop() -> int:
        return fifo.popleft() if prio is None else heapq.heappop(pq)[1]

    for i in range(dag.n):
        if waiting[i] == 0:
            push(i)
    running: list[tuple[float, int]] = []
    now = 0.0
    cap = parallel or dag.n
    while fifo or pq or running:
        while (fifo or pq) and len(running) < cap:
            i = pop()
            heapq.heappush(running, (now + dag.cost[i], i))
        now, i = heapq.heappop(running)
        finished = [i]
        while running and running[0][0] == now:
            finished.append(heapq.heappop(running)[1])
        for f in sorted(finished):
            for c in children[f]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    push(c)
    return now
