FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NUMBA_CACHE_DIR=/var/cache/numba \
    SCHED_SIM_STORE_DIR=/var/lib/sched-sim/store

WORKDIR /srv/sched-sim
COPY . /srv/sched-sim

# Editable install: sim_core/ and app/ stay here beside templates/ and static/, which the app finds relative to
# the repository root (app/web/templating.py). numba's cache keys on these same source paths at run time.
RUN pip install --no-cache-dir -e . \
    && useradd --system --uid 10001 --no-create-home sched \
    && mkdir -p "$NUMBA_CACHE_DIR" \
    && mkdir -p "$SCHED_SIM_STORE_DIR" && chown sched "$SCHED_SIM_STORE_DIR"

# Compile every numba kernel (the engine and the dashboard's KV-grid aggregation) at build time, into a cache
# the unprivileged server user can read and extend, so the first request is not slow.
RUN python -c "import sim_core, app.web.kvgrid; sim_core.warm_up(); app.web.kvgrid.warm_up()" \
    && python -c "from app.web import app" \
    && chmod -R a+rwX "$NUMBA_CACHE_DIR"

USER sched
# Uploaded traces, kept across restarts of the container when this is a volume.
VOLUME /var/lib/sched-sim/store
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"
CMD ["sched-sim", "serve", "--host", "0.0.0.0", "--port", "8000"]
