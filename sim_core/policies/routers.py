"""The routers' registry: each router's name, code and what it does, apart from the kernels that route
(routing.py), so that the scenario's choices and the CLI's help read it without loading the engine."""

ROUTE_ROUND_ROBIN, ROUTE_LEAST_OUTSTANDING, ROUTE_POWER_OF_TWO, ROUTE_PREFIX_AFFINITY, ROUTE_SESSION, ROUTE_RANDOM = range(6)
ROUTERS = {  # name -> (code, what it does)
    "round_robin": (ROUTE_ROUND_ROBIN, "each request to the next replica in turn"),
    "least_outstanding": (ROUTE_LEAST_OUTSTANDING, "the replica with the fewest tokens still to prefill (the "
                                                   "shortest prefill queue); ties in turn"),
    "power_of_two": (ROUTE_POWER_OF_TWO, "of two replicas drawn at random, the one with fewer tokens still to "
                                         "prefill"),
    "prefix_affinity": (ROUTE_PREFIX_AFFINITY, "cache-aware: the replica where the prompt's uncached tokens plus "
                                               "the KV tokens it already has outstanding are fewest"),
    "session": (ROUTE_SESSION, "a conversation's id hashed to a replica (sticky sessions)"),
    "random": (ROUTE_RANDOM, "a replica drawn uniformly at random for each request: the baseline that knows "
                             "nothing, which a router that looks at load or caches should beat"),
}
ROUTER_NAMES = tuple(ROUTERS)
# prefix_affinity's default cache weight: what one prompt token to compute weighs against one KV token a replica
# already has outstanding. 1, as Dynamo's KV router defaults its overlap-score weight (new prefill blocks against
# active blocks); higher keeps sessions on their cache longer, lower balances load sooner (Scenario field
# router_cache_weight).
DEFAULT_CACHE_WEIGHT = 1.0

