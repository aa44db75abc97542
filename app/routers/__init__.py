"""One router per resource; each stays thin: validate, delegate, shape the response."""
