FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NUMBA_CACHE_DIR=/var/cache/numba

WORKDIR /srv/sched-sim
COPY . /srv/sched-sim

# Non-editable install: sim_core and app go to site-packages. templates/ and static/ stay
# in /srv/sched-sim (the WORKDIR), which is where the app must look for them.
RUN pip install --no-cache-dir . \
    && mkdir -p "$NUMBA_CACHE_DIR" \
    && chmod 0777 "$NUMBA_CACHE_DIR"

# Compile the numba kernels once at build time so the first request is not slow.
RUN python -c "import sim_core; sim_core.warm_up()" \
    && chmod -R a+rwX "$NUMBA_CACHE_DIR"

EXPOSE 8000
CMD ["sched-sim", "serve", "--host", "0.0.0.0", "--port", "8000"]
