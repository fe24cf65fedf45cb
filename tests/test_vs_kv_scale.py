"""/vs draws both sides' KV grids at one scale (issue #41: one cell per 28 blocks beside one per 7, while the text
said a larger pool is a longer grid): the finer side is drawn again at the coarser side's cell size."""

from __future__ import annotations

from app.web import service
from app.web.vs_page import compute, parse_vs

A = "schedulers=fcfs&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=3"
B = A.replace("rtx3050", "a100")  # its pool is several times larger: coarser cells on its own


def test_the_pair_shares_one_kv_cell_size(client):
    alone = [service.compare_seeds(parse_vs([("a", q), ("b", q)]).a).views[0].kv["k"] for q in (A, B)]
    assert alone[0] < alone[1], alone  # drawn alone, the two pools take different cell sizes
    sides = compute(parse_vs([("a", A), ("b", B)]))
    cells = [s.results.views[0].kv["k"] for s in sides]
    assert cells == [alone[1], alone[1]], cells
    page = client.get("/vs", params={"a": A, "b": B}).text
    scale = f"One cell per {alone[1]} blocks."
    assert page.count(scale) == 2, scale
