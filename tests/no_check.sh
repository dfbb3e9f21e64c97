#!/bin/sh
# Stands in for the unit suites when configure did not find Check: a missing suite is a failure.
echo "FAIL: the Check unit-test framework was not found at configure time (apt-get install check), so the unit suites were not built" >&2
exit 1
