"""The HTTP layer: routes (one module per resource), their dependencies, and the error handlers.

Routes parse the request, call one service function (``app.services``) and shape the response;
the rules live in the services, and the domain errors they raise become HTTP answers only in
``app.api.errors``.
"""
