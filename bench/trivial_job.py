"""A job that returns at once (used by bench/submit.py)."""


def main(ctx):
    return ctx.attempt


def hold(ctx):
    """Holds its slots for args["seconds"] (default 600) or until cancelled."""
    import time
    time.sleep(float(ctx.args.get("seconds", 600)))
