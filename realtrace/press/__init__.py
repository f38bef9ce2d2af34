"""The press bridge: NVIDIA kvpress presses (KV-cache compression methods) on a captured trace set, against the exact
NM optimum at the same budget (issue 15).  One role per module:

* :mod:`.registry` -- the bridged presses, their papers and toolkit counterparts, how a press object is built at a
  budget (:func:`~.registry.ratio_for_budget`), kvpress imported on demand;
* :mod:`.recorder` -- running a press on a token sequence with the model and recording what it keeps (torch);
* :mod:`.schedule` -- a recorded run as an NM eviction schedule per layer and KV head (pure numpy);
* :mod:`.rows` -- the rows everything is charged on: the complete attention rows of the full cache, recomputed
  with the model and checked against the stored entries (default), or the stored top-k rows;
* :mod:`.eval` -- charging a schedule on a trace against the exact optimum, the best one-shot choice and the
  toolkit's policy of the same rule (pure numpy and the toolkit);
* :mod:`.run` -- one press on a whole trace set: run, replay, charge every trace, the answer check;
* :mod:`.board` -- the text table of one run, the leaderboard of every press at several budgets (figure, tables,
  JSON) and the report section;
* :mod:`.cli` -- the ``press`` command line (``python -m realtrace press``, ``python -m paper_check press``,
  ``python -m realtrace.press``).

Nothing here imports torch or kvpress at import time; running a press needs the ``[real,kvpress]`` extras.
"""
