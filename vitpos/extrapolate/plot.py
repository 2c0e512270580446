"""The picture of ``python -m vitpos.extrapolate``: test accuracy against the sizes tested.

A line per run and strategy through the square sizes (or the lengths), each at its side on a
numeric axis; the other sizes (``h x w``) after the squares, one step apart, as triangles along
their long side (:data:`vitpos.sizes.MARKERS`) not joined to the line, so that their tick labels
never overprint a square's. Ticks sit exactly at the sizes tested; the legend explains the
triangles and the hollow markers (upsampled test images), the title what was evaluated.
"""

from __future__ import annotations

from pathlib import Path

from vitpos.sizes import MARKERS, column_order, compact, equivalent_side, orientation, parse_name

#: what the picture's title says was evaluated, by kind (``res``: images, ``len``: sequences)
WHAT = {"res": "image resolutions", "len": "sequence lengths"}
XLABEL = {"res": "test resolution (pixels)", "len": "test length (tokens)"}
#: the legend's words for the triangles and the hollow markers
SHAPE_WORDS = {"wide": "wide h x w (h < w), after the squares", "tall": "tall h x w (h > w), after the squares"}
UPSAMPLED_WORDS = "hollow: upsampled test images (larger grid, no new detail)"


def named(size) -> int | str:
    """A size as the CSV and the ticks write it: a side, or ``"HxW"`` (a name read back included)."""
    return compact(parse_name(size) if isinstance(size, str) else size)


def positions(sizes) -> dict:
    """The x of each size (a side, a length or ``"HxW"``): a square at its side; the other sizes in
    :func:`vitpos.sizes.column_order` after the largest square, each one step further (the smallest
    step between two squares), so no tick label of theirs lands on a square's."""
    ordered = sorted({named(s) for s in sizes}, key=column_order)
    squares = [s for s in ordered if orientation(s) == "square"]
    sides = [equivalent_side(s) for s in squares]
    steps = [b - a for a, b in zip(sides, sides[1:])]
    step = min(steps) if steps else (sides[0] / 2 if sides else 1.0)
    where = dict(zip(squares, sides))
    last = sides[-1] if sides else 0.0
    for i, size in enumerate(s for s in ordered if orientation(s) != "square"):
        where[size] = last + step * (i + 1)
    return where


def plot_curves(frame, path: Path):
    """Test accuracy (%) against size, a line per run and strategy (``frame``: the rows of
    ``extrapolation.csv``, sizes as :func:`vitpos.sizes.compact` writes them), saved at ``path``;
    returns the figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    sizes = [named(s) for s in frame["size"]]
    where = positions(sizes)
    frame = frame.assign(x=[where[s] for s in sizes], shape=[orientation(s) for s in sizes])
    upsampled = frame["resampling"] == "upsampled" if "resampling" in frame else frame["x"] != frame["x"]
    for (run, strategy), part in frame.groupby(["run", "strategy"], sort=False):
        part = part.sort_values("x")
        flat = part[part["shape"] == "square"]
        color = ax.plot(flat["x"], 100 * flat["acc"], marker="o", label=f"{run} ({strategy})")[0].get_color()
        for shape, marker in MARKERS.items():
            at = part[part["shape"] == shape]
            if shape != "square":  # h x w after the squares, not joined to the line
                ax.plot(at["x"], 100 * at["acc"], marker, color=color)
            up = at[upsampled[at.index]]  # upsampled sizes (no new detail): hollow markers
            ax.plot(up["x"], 100 * up["acc"], marker, mfc="white", color=color)
    squares = [x for s, x in where.items() if orientation(s) == "square"]
    if squares and len(squares) < len(where):  # where the squares end and the h x w sizes begin
        ax.axvline((max(squares) + min(x for x in where.values() if x > max(squares))) / 2, color="0.8", lw=0.8)
    ax.set_xticks(list(where.values()), [str(s) for s in where], fontsize=7)
    kinds = sorted(set(frame["kind"]))
    ax.set_xlabel(" or ".join(XLABEL[k] for k in kinds))
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("test accuracy at other sizes: " + " and ".join(WHAT[k] for k in kinds), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(*legend_entries(ax, set(frame["shape"]), bool(upsampled.any())), fontsize=7, ncol=2)
    fig.savefig(path, dpi=120)
    return fig


def legend_entries(ax, shapes: set[str], upsampled: bool) -> tuple[list, list[str]]:
    """The runs' lines, then an entry per kind of marker the picture holds: the triangles (wide,
    tall) and the hollow markers."""
    from matplotlib.lines import Line2D

    handles, labels = ax.get_legend_handles_labels()
    for shape, words in SHAPE_WORDS.items():
        if shape in shapes:
            handles.append(Line2D([], [], linestyle="none", marker=MARKERS[shape], color="0.4"))
            labels.append(words)
    if upsampled:
        handles.append(Line2D([], [], linestyle="none", marker="o", mfc="white", color="0.4"))
        labels.append(UPSAMPLED_WORDS)
    return handles, labels
