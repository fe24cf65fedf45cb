"""A job's status card is drawn from one reading of the job. A sweep or frontier may end while its page renders
(on a cold server the page itself compiles for a minute while the sweep runs beside it): a card that read the job
running when it built its state, but found it finished when the template asked again, drew neither progress (so it
never polled) nor curves (it had built none): "Choose a range of arrival rates", for good. CI's cold run of
tests/test_browser_figures.py met exactly that."""

from __future__ import annotations

from types import SimpleNamespace

from app.web.figures.goodput import sweep_status
from app.web.frontier_page import FrontierJob
from app.web.frontier_page import status as frontier_status
from app.web.service import SweepJob
from app.web.templating import templates


def render(name: str, **ctx) -> str:
    return templates.get_template(name).render(request=None, **ctx)


def test_a_sweep_that_ends_while_its_card_renders_still_polls_for_its_curves():
    job = SweepJob(id="abc123", request=None, total=8, done=7)
    g = sweep_status(job)  # read while it runs
    job.result = {"rates": [], "schedulers": {}}  # ...and it ends before the template is rendered
    html = render("_goodput_status.html", g=g)
    assert 'hx-get="/goodput/abc123"' in html  # the next poll finds the curves
    assert "7/8 points simulated" in html
    assert "Choose a range" not in html


def test_a_frontier_that_ends_while_its_card_renders_still_polls_for_its_figure():
    ask = SimpleNamespace(query="frontier_gpus=h100")  # what the card's link reads of a running job's ask
    job = FrontierJob(id="def456", ask=ask, total=12, done=11)
    f = frontier_status(job)
    job.result = object()
    html = render("_frontier_status.html", f=f)
    assert 'hx-get="/frontier/def456"' in html
    assert "11/12 points simulated" in html
