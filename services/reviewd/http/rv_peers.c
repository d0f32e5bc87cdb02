/*
 * rv_peers.c: a count of connections per client address (see
 * rv_peers.h).  The addresses connected at once are few next to the
 * requests they send, so an array scanned under a mutex is enough; an
 * address whose count falls to 0 leaves it.
 */
#include "http/rv_peers.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct peer {
    unsigned char key[16]; /* IPv4 in the first 4 bytes, or IPv6 */
    unsigned count;
} peer;

struct rv_peers {
    pthread_mutex_t mu;
    unsigned limit;
    peer *v;
    size_t n, cap;
};

rv_peers *rv_peers_new(unsigned limit)
{
    rv_peers *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    p->limit = limit;
    return p;
}

void rv_peers_free(rv_peers *p)
{
    if (p == NULL)
        return;
    pthread_mutex_destroy(&p->mu);
    free(p->v);
    free(p);
}

/* addr's key; 0 for a family without one (never limited). */
static int key_of(const struct sockaddr *addr, unsigned char key[16])
{
    memset(key, 0, 16);
    if (addr->sa_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)addr)->sin_addr, 4);
        return 1;
    }
    if (addr->sa_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
        return 1;
    }
    return 0;
}

/* Under mu: addr's entry, or NULL. */
static peer *find(rv_peers *p, const unsigned char key[16])
{
    size_t i;

    for (i = 0; i < p->n; i++)
        if (memcmp(p->v[i].key, key, 16) == 0)
            return &p->v[i];
    return NULL;
}

int rv_peers_add(rv_peers *p, const struct sockaddr *addr)
{
    unsigned char key[16];
    peer *e;
    int ok = 1;

    if (p->limit == 0 || !key_of(addr, key))
        return 1;
    pthread_mutex_lock(&p->mu);
    e = find(p, key);
    if (e == NULL && p->n == p->cap) {
        const size_t cap = p->cap == 0 ? 16 : p->cap * 2;
        peer *v = realloc(p->v, cap * sizeof(*v));

        if (v != NULL) {
            p->v = v;
            p->cap = cap;
        }
    }
    if (e == NULL && p->n < p->cap) {
        e = &p->v[p->n++];
        memcpy(e->key, key, 16);
        e->count = 0;
    }
    if (e == NULL || e->count >= p->limit)
        ok = 0;
    else
        e->count++;
    pthread_mutex_unlock(&p->mu);
    return ok;
}

void rv_peers_remove(rv_peers *p, const struct sockaddr *addr)
{
    unsigned char key[16];
    peer *e;

    if (p->limit == 0 || !key_of(addr, key))
        return;
    pthread_mutex_lock(&p->mu);
    e = find(p, key);
    if (e != NULL && e->count > 0 && --e->count == 0)
        *e = p->v[--p->n];
    pthread_mutex_unlock(&p->mu);
}
