# mk/docker.mk — container images and the scale-out test on real containers
# (included by the Makefile's mk/*.mk line).
#
#   make image         docker/Dockerfile -> $(IMAGE_CPU) (CPU, OpenBLAS)
#   make image-cuda    docker/Dockerfile.cuda -> $(IMAGE_CUDA) (CUDA, cuBLAS)
#   make test-docker   installs and starts the engine if needed, makes an
#                      offline Debian 12 base image once (debootstrap, cached),
#                      builds the CPU image and a test nginx image on it with
#                      --network host, and runs tests/integration/test_scaleout.py
#                      on containers (host networking, 127.0.0.1 ports only)
#
# IMAGE_BASE=... picks the Debian 12 base of `make image` (default: the
# Dockerfile's debian:bookworm-slim, from a registry). `make test` runs the
# same scale-out test on plain processes, and on containers only where an
# engine already answers and the images exist (else it says why it skipped).

IMAGE_CPU   ?= opdispatch:cpu
IMAGE_CUDA  ?= opdispatch:cuda
IMAGE_NGINX ?= opdispatch-test-nginx:bookworm
IMAGE_BASE  ?=
OD_BASE_IMAGE ?= opdispatch-base:bookworm-minbase
DOCKER_BUILD := docker build --network host

.PHONY: image image-cuda test-docker docker-engine docker-base

image:
	$(DOCKER_BUILD) $(if $(IMAGE_BASE),--build-arg BASE=$(IMAGE_BASE)) -f docker/Dockerfile -t $(IMAGE_CPU) .

image-cuda:
	$(DOCKER_BUILD) -f docker/Dockerfile.cuda -t $(IMAGE_CUDA) .

docker-engine:
	@bash tools/setup-debs.sh docker.io debootstrap nginx wrk
	@bash tools/docker-engine.sh engine

docker-base: docker-engine
	@OD_BASE_IMAGE=$(OD_BASE_IMAGE) bash tools/docker-engine.sh base

test-docker: docker-base venv
	@$(MAKE) --no-print-directory image IMAGE_BASE=$(OD_BASE_IMAGE)
	$(DOCKER_BUILD) --build-arg BASE=$(OD_BASE_IMAGE) -f docker/nginx/Dockerfile -t $(IMAGE_NGINX) docker/nginx
	OD_SCALEOUT_CONTAINERS=1 OD_IMAGE=$(IMAGE_CPU) OD_NGINX_IMAGE=$(IMAGE_NGINX) \
	  .venv/bin/python -m pytest -q -rs -k "containers or test_deploy_files" \
	  tests/integration/test_scaleout.py tests/integration/test_deploy_files.py
