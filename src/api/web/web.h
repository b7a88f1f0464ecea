/* The playground page (web/dist, built from web/src and committed), served
 * at / from the binary itself (.incbin): no file is read at run time. */
#pragma once

#include "http/server.h"

struct app;

/* Adds the page's group: GET and HEAD of / (index.html) and of every file
 * of web/dist, all public (the page holds no secret; the API calls it makes
 * keep their auth). Only those exact paths are the group's: any other path
 * stays with the facade owning it (an unknown asset gets the runtime API's
 * 404). 0 or -ENOMEM. */
int api_web_register(struct http_server *srv, struct app *app);
