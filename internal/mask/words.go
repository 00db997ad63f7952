package mask

import "strings"

// firstNames, lastNames and words are what name, email and text rules
// write: plain ASCII, so that the output is valid in every server
// encoding, and never anyone's real data. Each is one line of words, so
// that three lists of names read as data, not as code written three times.
var firstNames = strings.Fields("Ada Alan Alice Amir Anna Aria Ben Bruno Carla Chen Clara Dana David Elena Emil Eva Farah Felix Grace Hana Hugo Ines Ivan Jana Jonas Julia Kai Kenji Lara Leo Lina Luca Maya Mateo Mia Nadia Nico Nora Omar Olga Paul Petra Quinn Rosa Ravi Sara Sven Tara Theo Uma Vera Victor Wanda Will Xena Yara Yusuf Zoe Zane Iris Otto Ruth Sami Tomas")

var lastNames = strings.Fields("Abbott Baker Berg Brooks Castro Chang Cole Costa Dalton Diaz Ellis Evans Fischer Flores Garcia Gray Hansen Hayes Ito Jensen Keller Khan Klein Lang Lopez Martin Meyer Moreau Nagy Novak Olsen Ortiz Park Perez Quinn Reed Rossi Sato Schmidt Silva Smith Stone Tanaka Torres Vance Vargas Walsh Weber Wolf Young Zhang Ziegler Nowak Horvat Dubois Kowalski Lindqvist Moretti Okafor Petrov Ramos Suzuki Varga Yilmaz")

var words = strings.Fields("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris nisi aliquip ex ea commodo consequat duis aute irure in reprehenderit voluptate velit esse cillum fugiat nulla pariatur excepteur sint occaecat cupidatat non proident sunt culpa qui officia deserunt mollit anim id est laborum at vero")
