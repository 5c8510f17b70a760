#!/bin/sh
# weather-tool: answers with the reference page's sunny 21 degrees, varied
# a little by the location's length so that different places differ.
exec jq -c '.input.location as $loc
  | {output: {location: $loc,
              temperatureCelsius: (14 + (($loc | length) % 12)),
              conditions: (["sunny", "cloudy", "rainy", "windy"][($loc | length) % 4])}}'
