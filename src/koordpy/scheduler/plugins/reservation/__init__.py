"""Koordinator Reservations: resources held on a node for named owners (pure).

``spec``: the Reservation view and owner matching. See the package README for the whole rule set.
"""
