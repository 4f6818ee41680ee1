// The sign-in form keeps the page's deep link (the part after #, which a
// browser never sends): posted to /signin#..., the redirect to / that
// answers a good token inherits it, and the app opens that view.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("signin");
  if (form && window.location.hash) form.action = "/signin" + window.location.hash;
});
