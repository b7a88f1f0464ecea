/* Egress policies of the controller API (issue 15, item 3), shared by
 * api/controller/egress*.c only. The data path is sandbox/egress/; this is
 * its policy source (authorize), its audit sink (record) and the routes. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "store/store.h"

/* The policy document of a request body (unknown members dropped, the
 * seed's defaults filled in, domains lower-cased): a new reference, or
 * NULL with why filled. */
json_t *ctl_egress_policy_doc(json_t *in, char *why, size_t len);
/* {id, organizationId, policyName, …, createdAt, updatedAt}: a new reference. */
json_t *ctl_egress_policy_view(const struct egress_policy_row *row);
