package web

// WSPerPerson is the cap on one person's open sockets, for the tests (web_test).
const WSPerPerson = wsPerPerson
