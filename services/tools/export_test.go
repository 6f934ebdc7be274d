package tools

// SortByNameInDB is sortByNameInDB, the path for a database whose collation is not C.
var SortByNameInDB = sortByNameInDB
