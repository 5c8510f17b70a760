#!/bin/sh
# weather-tool: answers with the reference page's sunny 21 degrees, varied
# a little by the location's length so that different places differ. The
# input's unit is always there: berth fills in its default ("C").
exec jq -c '.input.location as $loc
  | .input.unit as $unit
  | (14 + (($loc | length) % 12)) as $c
  | {output: {location: $loc,
              temperatureCelsius: $c,
              temperature: (if $unit == "F" then $c * 9 / 5 + 32 else $c end),
              unit: $unit,
              conditions: (["sunny", "cloudy", "rainy", "windy"][($loc | length) % 4])}}'
