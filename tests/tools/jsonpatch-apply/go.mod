module outfit.dev/tests/jsonpatch-apply

go 1.24

require gopkg.in/evanphx/json-patch.v4 v4.13.0
