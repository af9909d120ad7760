# Multi-stage build of a static, non-root image.
#   docker build --build-arg VERSION=$(git describe --tags --always) -t baremetal-cloud-controller-manager .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd cmd
COPY pkg pkg
COPY Makefile Makefile
ARG VERSION=unknown
ARG COMMIT=unknown
RUN make build VERSION=$VERSION COMMIT=$COMMIT

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/baremetal-cloud-controller-manager /usr/local/bin/baremetal-cloud-controller-manager
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/baremetal-cloud-controller-manager"]
