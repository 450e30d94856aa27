# Runs in the job's directory, where the pilot put the InputSandbox files.
while read -r name; do echo "hello, $name"; done < names.txt > greetings.txt
wc -l < greetings.txt > count.log
echo "greeted $(cat count.log) names"
