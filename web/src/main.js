console.log("playground");
