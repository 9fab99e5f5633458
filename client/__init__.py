"""The client side of the scoring service: HTTP clients (`http`) and the trainers' reward adapters (`adapters`)."""
