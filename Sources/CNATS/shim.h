// The NATS C client (Debian's libnats-dev, 3.4), for the raw pub/sub anchor in relay-bench.
#include <nats/nats.h>
