"""The grpc.aio servicer's hand-over of the batcher's finished futures to the event loop (``_Completions``)."""

import asyncio
import concurrent.futures
import threading

import pytest

from seed_rl.transport.aio_server import DRAIN_CHUNK, _Completions


def _run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=30))


def test_results_errors_and_cancellations_reach_the_waiters_from_another_thread():
    async def main():
        completions = _Completions(asyncio.get_running_loop())
        futures = [concurrent.futures.Future() for _ in range(3)]
        waiters = [completions.wrap(f) for f in futures]

        def finish():  # as the batcher thread does
            futures[0].set_result("actions")
            futures[1].set_exception(ValueError("inference failed"))
            futures[2].cancel()

        threading.Thread(target=finish).start()
        assert await waiters[0] == "actions"
        with pytest.raises(ValueError, match="inference failed"):
            await waiters[1]
        with pytest.raises(asyncio.CancelledError):
            await waiters[2]

    _run(main())


def test_a_burst_larger_than_a_chunk_is_delivered_over_several_loop_iterations():
    async def main():
        loop = asyncio.get_running_loop()
        completions = _Completions(loop)
        n = 3 * DRAIN_CHUNK + 5
        futures = [concurrent.futures.Future() for _ in range(n)]
        waiters = [completions.wrap(f) for f in futures]
        iterations = 0
        stop = False

        async def count_iterations():
            nonlocal iterations
            while not stop:
                iterations += 1
                await asyncio.sleep(0)

        counter = asyncio.create_task(count_iterations())
        await asyncio.sleep(0)
        threading.Thread(target=lambda: [f.set_result(i) for i, f in enumerate(futures)]).start()
        assert await asyncio.gather(*waiters) == list(range(n))
        stop = True
        await counter
        assert iterations >= 4  # the loop turned between the chunks (it would take one turn for all at once)

    _run(main())


def test_a_waiter_cancelled_first_is_skipped():
    async def main():
        completions = _Completions(asyncio.get_running_loop())
        future = concurrent.futures.Future()
        waiter = completions.wrap(future)
        waiter.cancel()
        future.set_result("late")
        await asyncio.sleep(0.05)
        assert waiter.cancelled()
        other = concurrent.futures.Future()
        other_waiter = completions.wrap(other)
        other.set_result("next")
        assert await other_waiter == "next"  # the hand-over still works

    _run(main())
