// Concrete behaviors live here (issue 3).
