"""The benches' one way to get matplotlib's pyplot for a PNG beside their tables, headless (the Agg backend)."""


def pyplot(what: str = ""):
    """matplotlib.pyplot with the Agg backend, or None (printing that `what` is skipped) when matplotlib is not
    installed: the benches' CSVs and printed tables hold the same numbers."""
    try:
        import matplotlib
    except ImportError:
        print(f"matplotlib is not installed: no {what or 'plot'} (the CSV and the table hold the same numbers)")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
