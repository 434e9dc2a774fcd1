"use strict";
// The token form's one piece of behaviour: say so when the last token was wrong.
if (new URLSearchParams(location.search).has("denied")) {
  document.getElementById("denied").hidden = false;
}
