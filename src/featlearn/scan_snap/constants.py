"""Token-id layout constants of the sequence classes (no torch, so that figure jobs start quickly); see
``featlearn.scan_snap.data`` for the layout they describe."""

N_COMMON = 10
N_DISTINCT = 10

# Syn-Small layouts (Fig. 4): a separate query per class, or one shared query for both classes.
LAYOUTS = {"separate": (2, 1), "shared": (1, 2)}
