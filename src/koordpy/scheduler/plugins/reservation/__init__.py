"""Koordinator Reservations: resources held on a node for named owners (pure).

``spec``: the Reservation view and owner matching; ``ledger``: what placed reservations hold and the
reserved verdict for other pods; ``placement``: placing a Pending reservation and the node score;
``starving``: starving jobs, the node cap, names and labels; ``controller``: ``decide``, one decision
pass; ``offline``: that decision on a dump (``koordpy scheduler reservations``). The whole rule set is
in docs/reservations.md.
"""
