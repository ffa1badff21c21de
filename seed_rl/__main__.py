"""``python -m seed_rl <command>``: the same as the ``seed-rl`` console script."""

from seed_rl.cli import run

if __name__ == "__main__":
    run()
