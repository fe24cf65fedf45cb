"""How much work the web takes on at once, the limits a 503 names (service.BusyError.limit) and /api/catalog lists
(budget.limits): simulations at once, API requests in the simulation lane, plans and frontiers running or queued.
A module of their own: service, plan_jobs and frontier_page enforce them and import budget, which lists them."""

MAX_SIMULATIONS = 2  # at once: each allocates tens of MB, and two cores are busy with two
# Requests that may simulate, running or in line for the simulation lane (lane.FairLine); past this the answer is
# an immediate 503 with the time the line needs to drain (http.run_until_disconnect).
MAX_IN_FLIGHT = 64
MAX_QUEUED_PLANS = 2
MAX_QUEUED_FRONTIERS = 2
